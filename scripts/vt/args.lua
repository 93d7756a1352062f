-- Command-line arguments of vtrun's scripts, one style everywhere: `key=value`.
--
--   local a = vt.args({model = "mlp", steps = 200, threads = {1, 2}, quick = false}, arg)
--   -- vtrun script.lua model=gpt steps=50 threads=1,2,4 quick=true
--
-- Each value takes the type of its default: numbers must parse, booleans are true/false
-- (or 1/0), lists are comma-separated (of numbers when the default's items are numbers),
-- strings are taken as they are ("" is the usual default for an optional path). An unknown
-- key, a bare word or a value of the wrong type is an error naming the valid keys.
local function usage(defaults)
  local keys = {}
  for k in pairs(defaults) do keys[#keys + 1] = k .. "=" end
  table.sort(keys)
  return table.concat(keys, " ")
end

local function convert(key, text, default)
  local t = type(default)
  if t == "number" then
    local v = tonumber(text)
    if v == nil then error("argument " .. key .. "=" .. text .. ": " .. key .. " must be a number", 0) end
    return v
  elseif t == "boolean" then
    if text == "true" or text == "1" then return true end
    if text == "false" or text == "0" then return false end
    error("argument " .. key .. "=" .. text .. ": " .. key .. " must be true or false", 0)
  elseif t == "table" then
    local out = {}
    for item in text:gmatch("[^,]+") do
      if type(default[1]) == "number" then
        local v = tonumber(item)
        if v == nil then error("argument " .. key .. "=" .. text .. ": " .. key .. " is a list of numbers", 0) end
        out[#out + 1] = v
      else
        out[#out + 1] = item
      end
    end
    return out
  end
  return text
end

return function(defaults, argv)
  local out = {}
  for k, v in pairs(defaults) do out[k] = v end
  for _, a in ipairs(argv or {}) do
    local k, v = a:match("^([%w_]+)=(.*)$")
    if k == nil then
      error("argument '" .. a .. "' is not key=value (valid: " .. usage(defaults) .. ")", 0)
    end
    if defaults[k] == nil then
      error("unknown argument '" .. k .. "' (valid: " .. usage(defaults) .. ")", 0)
    end
    out[k] = convert(k, v, defaults[k])
  end
  return out
end
