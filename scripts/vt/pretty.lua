-- Pretty printing for the REPL and scripts: nested tables indented with sorted keys, short
-- tables on one line, cycles marked, tensors and other userdata through their __tostring.
--
-- format(v, options) takes, all optional: `precision` (significant digits of numbers,
-- default 14 as Lua's tostring; 17 shows every bit of a double), `hex` (numbers as C99 hex
-- floats, exact), and `compact` (the REPL's view: strings over `max_string` characters cut,
-- binary strings summarized by size, tables below the top level with more than `max_items`
-- entries folded to a count; vt.show(v) prints any value in full).
local M = {}

local kWidth = 78      -- one-line tables up to this many characters
local kMaxItems = 100  -- entries shown per table before "..."
local kMaxDepth = 8

local function is_identifier(s)
  return type(s) == "string" and s:match("^[%a_][%w_]*$") ~= nil
end

local function sorted_keys(t)
  local n = #t
  local keys = {}
  for k in pairs(t) do
    if not (type(k) == "number" and k >= 1 and k <= n and k == math.floor(k)) then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys, function(a, b)
    local ta, tb = type(a), type(b)
    if ta ~= tb then return ta < tb end
    if ta == "number" or ta == "string" then return a < b end
    return tostring(a) < tostring(b)
  end)
  return n, keys
end

local format

local function indent_lines(s, pad)
  return (s:gsub("\n", "\n" .. pad))
end

local function format_table(t, depth, seen, o)
  if seen[t] then return "<cycle: " .. tostring(t) .. ">" end
  if depth > kMaxDepth then return "{...}" end
  local mt = getmetatable(t)
  if mt and mt.__tostring then return tostring(t) end
  local n, keys = sorted_keys(t)
  if o.compact and depth > 0 and n + #keys > o.max_items then
    return string.format("{... %d entries}", n + #keys)
  end
  seen[t] = true
  local items = {}
  local shown = 0
  for i = 1, n do
    shown = shown + 1
    if shown > kMaxItems then break end
    items[#items + 1] = format(t[i], depth + 1, seen, o)
  end
  for _, k in ipairs(keys) do
    shown = shown + 1
    if shown > kMaxItems then break end
    local key = is_identifier(k) and k or ("[" .. format(k, depth + 1, seen, o) .. "]")
    items[#items + 1] = key .. " = " .. format(t[k], depth + 1, seen, o)
  end
  local total = n + #keys
  if total > kMaxItems then
    items[#items + 1] = "... (" .. (total - kMaxItems) .. " more)"
  end
  seen[t] = nil
  if #items == 0 then return "{}" end
  local one_line = "{" .. table.concat(items, ", ") .. "}"
  if #one_line <= kWidth and not one_line:find("\n") then return one_line end
  local pad = "  "
  local lines = {}
  for i, item in ipairs(items) do
    lines[i] = pad .. indent_lines(item, pad)
  end
  return "{\n" .. table.concat(lines, ",\n") .. "\n}"
end

local function is_binary(s)
  return s:find("[%z\1-\8\11\12\14-\31\127-\255]") ~= nil
end

local function format_string(v, o)
  if o.compact and #v > o.max_string then
    if is_binary(v) then return string.format("<%d bytes of binary data>", #v) end
    return string.format("%q", v:sub(1, o.max_string)) .. string.format(" ... (%d bytes)", #v)
  end
  return string.format("%q", v)
end

local function format_number(v, o)
  if v ~= v or v == math.huge or v == -math.huge then return tostring(v) end
  if v == 0 then return 1 / v < 0 and "-0" or "0" end
  -- Integers below 2^53 are exact in decimal, in every mode.
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  if o.hex then return string.format("%a", v) end
  return string.format("%." .. o.precision .. "g", v)
end

format = function(v, depth, seen, o)
  local tv = type(v)
  if tv == "string" then
    return format_string(v, o)
  elseif tv == "number" then
    return format_number(v, o)
  elseif tv == "table" then
    return format_table(v, depth or 0, seen or {}, o)
  else
    return tostring(v)
  end
end

local defaults = {precision = 14, hex = false, compact = false, max_string = 100, max_items = 12}

-- A readable string for any value (strings are quoted); see the options above.
function M.format(v, options)
  local o = {}
  for k, d in pairs(defaults) do o[k] = d end
  for k, x in pairs(options or {}) do
    if defaults[k] == nil then error("vt.pretty.format: unknown option '" .. tostring(k) .. "'", 2) end
    o[k] = x
  end
  if type(o.precision) ~= "number" or o.precision < 1 or o.precision > 17 or o.precision ~= math.floor(o.precision) then
    error("vt.pretty.format: precision must be an integer in [1, 17], got " .. tostring(o.precision), 2)
  end
  return format(v, 0, {}, o)
end

-- Like print, but tables are expanded; top-level strings are printed as they are.
function M.print(...)
  local n = select("#", ...)
  local parts = {}
  for i = 1, n do
    local v = select(i, ...)
    parts[i] = type(v) == "string" and v or M.format(v)
  end
  io.write(table.concat(parts, "\t"), "\n")
end

return M
