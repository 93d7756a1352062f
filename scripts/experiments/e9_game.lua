-- E9 (paper section 3): the verification game on every scenario of PROTOCOL.md, with the
-- outcome, the interval found, bisection rounds, judge cost against training, and the
-- logged (steerable) entries per step. A thin wrapper over scripts/protocols/all.lua that
-- writes the table as JSON.
--
--   vtrun scripts/experiments/e9_game.lua [out=] [setup=mnist] [steps=60] [k=5] [remote=true]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({out = "", setup = "mnist", steps = 60, k = 5, remote = true}, arg)
local out = lib.outdir("e9_game", a.out)
print("machine: " .. lib.machine())
local args = {"setup=" .. a.setup, "steps=" .. a.steps, "k=" .. a.k, "json=" .. out .. "/e9_game.json"}
if a.remote then
  for _, x in ipairs{"remote=true", "auditor=nofma", "judge=refblas"} do args[#args + 1] = x end
end
local ok = require("protocols.scenarios").main(nil, args)
os.exit(ok and 0 or 1)
