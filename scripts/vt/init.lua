-- The vt module: the C++ core ("vt.core") plus the parts written in Lua.
-- `vt` is preloaded as a global by vtrun; `require "vt"` returns the same table.
local vt = require "vt.core"

-- The byte-level text corpus the examples, experiments and benchmarks use: the Shakespeare
-- text shipped in data/ of the repository, or the file VTRUN_CORPUS names.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
vt.corpus = os.getenv("VTRUN_CORPUS") or (here .. "../../data/shakespeare.txt")

-- Lua-side modules load on first use, so `vt.test` costs nothing until a test touches it.
local lazy = {
  test = "vt.test",
  pretty = "vt.pretty",
  repl = "vt.repl",
  game = "vt.game",
  calibrate = "vt.calibrate",
  args = "vt.args",
  nn = "vt.nn",
}

-- vt.show(v): any value printed in full (the REPL's own printing folds long strings and
-- large nested tables).
function vt.show(v) return require("vt.repl").show(v) end

return setmetatable(vt, {
  __index = function(t, key)
    local name = lazy[key]
    if name == nil then return nil end
    local module = require(name)
    rawset(t, key, module)
    return module
  end,
})
