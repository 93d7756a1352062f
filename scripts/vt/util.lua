-- Small helpers shared by the Lua modules of vt (vt.game, vt.calibrate).
local M = {}

-- Raises "api: unknown option 'x' (valid: a, b)" for a key outside `valid`; returns the
-- options ({} for nil). The error blames the caller of the function that checks (level 3).
function M.check_options(api, options, valid)
  if options == nil then return {} end
  if type(options) ~= "table" then error(api .. ": options must be a table", 3) end
  local allowed = {}
  for _, k in ipairs(valid) do allowed[k] = true end
  for k in pairs(options) do
    if not allowed[k] then
      table.sort(valid)
      error(string.format("%s: unknown option '%s' (valid: %s)", api, tostring(k), table.concat(valid, ", ")), 3)
    end
  end
  return options
end

return M
