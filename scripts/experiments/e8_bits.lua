-- E8 (paper Figure 4c/d): held-out loss and trainer time per step against b, the number of
-- leading bits of the FP32 word kept at forward, backward and gradient boundaries.
--
--   vtrun scripts/experiments/e8_bits.lua [model=mlp] [steps=200] [bits=32,30,28,26,24,22,20] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "mlp", steps = 200, bits = "32,30,28,26,24,22,20", out = ""}, arg)
local out = lib.outdir("e8_bits", a.out)
local s = lib.setup(a.model)
local eval = vt.game.data(s.eval)
local tmp = lib.tmpdir()

local header = {"b", "held-out loss", "held-out accuracy", "train loss (last step)", "trainer s/step", "logged %"}
local rows = {}
for b in a.bits:gmatch("%d+") do
  local spec = lib.spec(s, a.steps, {bits = tonumber(b), band = 0.25})
  local t = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/b" .. b)}
  local r = t:run{progress = false}
  local e = t:evaluate(eval, {limit = 2048})
  rows[#rows + 1] = {tonumber(b), e.loss, e.accuracy, r.loss, r.seconds / a.steps, 100 * r.logged / r.elements}
  io.stderr:write(string.format("E8: b = %s done\n", b))
end
print("machine: " .. lib.machine())
print(string.format("E8: %s, %d steps per b, paper window", a.model, a.steps))
lib.table(header, rows)
lib.csv(out .. "/e8_bits.csv", header, rows)
lib.plot(out .. "/e8_bits.png", out .. "/e8_bits.csv", {
  title = string.format("E8: held-out loss and trainer time against b (%s, %d steps)", a.model, a.steps),
  xlabel = "b (bits kept)", ylabel = "held-out loss", y2label = "trainer seconds per step",
  series = {{column = 2, title = "held-out loss"}, {column = 5, title = "trainer s/step", y2 = true}}})
vt.fs.remove(tmp)
print(vt.json.encode{experiment = "E8", loss_b32 = rows[1][2], loss_min_bits = rows[#rows][2]})
