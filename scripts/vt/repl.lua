-- Helpers the REPL (bindings/repl.cc) calls: printing results and completing names.
local pretty = require "vt.pretty"

local M = {}

local keywords = {
  "and", "break", "do", "else", "elseif", "end", "false", "for", "function", "goto", "if",
  "in", "local", "nil", "not", "or", "repeat", "return", "then", "true", "until", "while",
}

-- How the REPL prints values (vt.repl.options{...} changes them): digits of numbers
-- (`precision`, 1-17; 17 shows every bit), `hex` floats, and `compact` views of long
-- strings and large nested tables (vt.show(v) prints a value in full).
local options = {precision = 14, hex = false, compact = true}

-- vt.repl.options{precision = 17, hex = false, compact = true}: sets the given fields and
-- returns the current options.
function M.options(new)
  if new ~= nil and type(new) ~= "table" then error("vt.repl.options: expected a table {precision=, hex=, compact=}", 2) end
  for k, v in pairs(new or {}) do
    if options[k] == nil then error("vt.repl.options: unknown option '" .. tostring(k) .. "' (valid: precision, hex, compact)", 2) end
    if k == "precision" and (type(v) ~= "number" or v < 1 or v > 17 or v ~= math.floor(v)) then
      error("vt.repl.options: precision must be an integer in [1, 17], got " .. tostring(v), 2)
    end
    if k ~= "precision" and type(v) ~= "boolean" then error("vt.repl.options: " .. k .. " must be true or false", 2) end
    options[k] = v
  end
  return {precision = options.precision, hex = options.hex, compact = options.compact}
end

-- Prints the values an expression returned: each pretty-printed, strings quoted so that
-- "1" and 1 look different.
function M.print_results(n, ...)
  local parts = {}
  for i = 1, n do
    parts[i] = pretty.format((select(i, ...)), options)
  end
  io.write(table.concat(parts, "\t"), "\n")
end

-- Prints `v` in full (no compact view), whatever the options.
function M.show(v)
  io.write(pretty.format(v, {precision = options.precision, hex = options.hex}), "\n")
end

-- The API reference's lines that document `name` ("vt.tensor.zeros", "run", ":steps"):
-- table rows and paragraphs of docs/API.md and docs/api/*.md where `name` appears in code
-- quotes. ?name at the REPL prints them.
local here = debug.getinfo(1, "S").source:match("^@(.*/)") or "./"
local function doc_files()
  local root = here .. "../../docs/"
  local files = {root .. "API.md"}
  for _, page in ipairs{"engine", "precision", "store", "game"} do files[#files + 1] = root .. "api/" .. page .. ".md" end
  return files, root
end

function M.help(name)
  name = (name or ""):gsub("^%s+", ""):gsub("%s+$", "")
  if name == "" then
    io.write("?name prints what the API reference says of name, e.g. ?vt.tensor.zeros, ?vt.trainer, ?run\n")
    return
  end
  local files, root = doc_files()
  local short = name:match("[%.:]([%w_]+)$")
  local found, shown = 0, 0
  local pattern = "`[^`]*" .. name:gsub("[%^%$%(%)%%%.%[%]%*%+%-%?]", "%%%0") .. "[^%w_]"
  local short_pattern = short and ("`[^`]*[%.:]" .. short .. "[^%w_]") or nil
  for _, path in ipairs(files) do
    local f = io.open(path)
    if f then
      local n = 0
      for line in f:lines() do
        n = n + 1
        if line:find(pattern) or (short_pattern and line:find(short_pattern)) then
          found = found + 1
          if shown < 12 then
            shown = shown + 1
            io.write(path:sub(#root + 1), ":", n, ": ", line, "\n")
          end
        end
      end
      f:close()
    end
  end
  if found == 0 then
    local value = (function()
      local v = _G
      for part in name:gmatch("[^%.:]+") do
        if type(v) ~= "table" and type(v) ~= "userdata" then return nil end
        local ok, nv = pcall(function() return v[part] end)
        if not ok then return nil end
        v = nv
      end
      return v
    end)()
    io.write("no entry for '", name, "' in the API reference (docs/API.md, docs/api/)",
             value ~= nil and (": it is a " .. type(value)) or "", "\n")
  elseif found > shown then
    io.write("(", found - shown, " more lines)\n")
  end
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
