-- Helpers the REPL (bindings/repl.cc) calls: printing results and completing names.
local pretty = require "vt.pretty"

local M = {}

local keywords = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
}

-- Prints the values an expression returned: each pretty-printed, strings quoted so that
-- "1" and 1 look different.
function M.print_results(n, ...)
  local parts = {}
  for i = 1, n do
    parts[i] = pretty.format((select(i, ...)))
  end
  io.write(table.concat(parts, "\t"), "\n")
end

-- Tables whose keys name the fields reachable from a value: the table itself, then its
-- metatable's __index chain (tables only, never calling functions), and a userdata's
-- metatable "methods" (as vt.Tensor keeps them).
local function field_sources(value)
  local sources = {}
  local seen = {}
  local v = value
  for _ = 1, 8 do
    if v == nil or seen[v] then break end
    seen[v] = true
    if type(v) == "table" then sources[#sources + 1] = v end
    local mt = getmetatable(v)
    if type(mt) ~= "table" then break end
    if type(rawget(mt, "methods")) == "table" then sources[#sources + 1] = rawget(mt, "methods") end
    local index = rawget(mt, "__index")
    if type(index) ~= "table" then break end
    v = index
  end
  return sources
end

-- Resolves a dotted path ("vt.tensor") without running code beyond plain indexing.
local function resolve(path)
  local value = _G
  for name in path:gmatch("[^%.:]+") do
    if type(value) ~= "table" and type(value) ~= "userdata" then return nil end
    local ok, next_value = pcall(function() return value[name] end)
    if not ok then return nil end
    value = next_value
  end
  return value
end

-- Completion candidates (full words) for `word` as typed: "pri" -> {"print"},
-- "vt.ten" -> {"vt.tensor"}, "t:su" -> {"t:sum"}.
function M.complete(word)
  local path, sep, partial = word:match("^(.-)([%.:])([%w_]*)$")
  local out, seen = {}, {}
  local function add(candidate)
    if not seen[candidate] then
      seen[candidate] = true
      out[#out + 1] = candidate
    end
  end
  if path == nil then
    partial = word
    for _, k in ipairs(keywords) do
      if k:sub(1, #partial) == partial then add(k) end
    end
    for _, source in ipairs(field_sources(_G)) do
      for k in pairs(source) do
        if type(k) == "string" and k:sub(1, #partial) == partial then add(k) end
      end
    end
  else
    local value = resolve(path)
    for _, source in ipairs(field_sources(value)) do
      for k, v in pairs(source) do
        if type(k) == "string" and k:match("^[%a_][%w_]*$") and k:sub(1, #partial) == partial
            and (sep == "." or type(v) == "function") then
          add(path .. sep .. k)
        end
      end
    end
    -- vt's Lua-side modules load lazily; offer them too.
    if value == rawget(_G, "vt") then
      for _, k in ipairs({"test", "pretty", "repl"}) do
        if k:sub(1, #partial) == partial then add(path .. sep .. k) end
      end
    end
  end
  table.sort(out)
  return out
end

return M
