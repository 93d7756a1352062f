-- Pretty printing for the REPL and scripts: nested tables indented with sorted keys, short
-- tables on one line, cycles marked, tensors and other userdata through their __tostring.
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

local function format_table(t, depth, seen)
  if seen[t] then return "<cycle: " .. tostring(t) .. ">" end
  if depth > kMaxDepth then return "{...}" end
  local mt = getmetatable(t)
  if mt and mt.__tostring then return tostring(t) end
  seen[t] = true
  local n, keys = sorted_keys(t)
  local items = {}
  local shown = 0
  for i = 1, n do
    shown = shown + 1
    if shown > kMaxItems then break end
    items[#items + 1] = format(t[i], depth + 1, seen)
  end
  for _, k in ipairs(keys) do
    shown = shown + 1
    if shown > kMaxItems then break end
    local key = is_identifier(k) and k or ("[" .. format(k, depth + 1, seen) .. "]")
    items[#items + 1] = key .. " = " .. format(t[k], depth + 1, seen)
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

format = function(v, depth, seen)
  local tv = type(v)
  if tv == "string" then
    return string.format("%q", v)
  elseif tv == "table" then
    return format_table(v, depth or 0, seen or {})
  else
    return tostring(v)
  end
end

-- A readable string for any value (strings are quoted).
function M.format(v)
  return format(v, 0, {})
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
