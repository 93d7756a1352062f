-- The vt module: the C++ core ("vt.core") plus the parts written in Lua.
-- `vt` is preloaded as a global by vtrun; `require "vt"` returns the same table.
local vt = require "vt.core"

-- Lua-side modules load on first use, so `vt.test` costs nothing until a test touches it.
local lazy = {
  test = "vt.test",
  pretty = "vt.pretty",
  repl = "vt.repl",
  game = "vt.game",
  calibrate = "vt.calibrate",
}

return setmetatable(vt, {
  __index = function(t, key)
    local name = lazy[key]
    if name == nil then return nil end
    local module = require(name)
    rawset(t, key, module)
    return module
  end,
})
