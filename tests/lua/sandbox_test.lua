-- A model's Lua source is hostile input: it comes with a spec, and every party that reads the
-- spec runs it (the client, the auditor, the judge, every worker and rank). Each test is an
-- escape that worked before the sandbox refused it: files written, the host's methods
-- reached, process-dependent models, hangs inside C, crashes.
local T = require "vt.test"

local tmp = vt.fs.tmpdir("vtrun-sandbox")
local data = vt.data.synthetic{size = 32, input_shape = {4}, classes = 2, seed = 1}
local HONEST = " return vt.nn.Sequential{vt.nn.Linear(4, 2)}"

-- The spec of a source, parsed again as an auditor would (in a model state of its own);
-- with `step`, one plain step is taken too (the forward runs).
local function parse(source, step)
  local spec = vt.spec{model = vt.nn.model{source = source}, data = data, steps = 1, batch = 4}
  local parsed = vt.spec.parse(spec:canonical())
  if step then vt.trainer{spec = parsed, data = data, mode = "fp64"}:step() end
  return parsed
end
-- A source that behaves in the caller's state (where string.dump exists) and attacks in the
-- spec's model states, as a cheater's source would.
local function hostile(code) return "if ('').dump == nil then " .. code .. " end" .. HONEST end
local function refused(code, message, step)
  T.assert_error(function() parse(hostile(code), step) end, message, true)
end

local s = T.suite("sandbox")
s:test("a source cannot write files, while building or in a forward", function()
  local a, b = tmp .. "/built", tmp .. "/forward"
  refused("vt.tensor({1, 2}):save('" .. a .. "')", "cannot write files")
  T.assert_false(vt.fs.exists(a))
  local forward = "local M = vt.nn.Module{kind = 'Evil', forward = function(self, x) " ..
                  "local mt = getmetatable(x) if mt then mt.methods.save(x, '" .. b .. "') end " ..
                  "return x:save('" .. b .. "') end} return vt.nn.Sequential{vt.nn.Linear(4, 2), M()}"
  T.assert_error(function() parse(forward, true) end, "cannot write files", true)
  T.assert_false(vt.fs.exists(b))
end)
s:test("the host's metatables are out of reach", function()
  -- (a tensor's holds save and the refused operations; its __gc runs outside the budget)
  parse(hostile("assert(getmetatable(vt.tensor{1}) == nil) assert(getmetatable('') == nil)"))
  refused("local mt = getmetatable(vt.tensor{1}) mt.__gc = function() while true do end end", "attempt to index")
end)
s:test("operations that differ between machines are refused at build time too", function()
  refused("local t = vt.tensor{1, 2}:tanh()", "gives different bits on different machines")
  refused("local t = vt.tensor{{1, 2}}:matmul(vt.tensor{{1}, {2}})", "gives different bits on different machines")
end)
s:test("a source sees the same order and text in every process", function()
  parse(hostile("local t = {} for i = 1, 9 do t['k' .. i] = i end t[3] = 0 t[1] = 0 " ..
                "local order = {} for k in pairs(t) do order[#order + 1] = tostring(k) end " ..
                "assert(table.concat(order, ',') == '1,3,k1,k2,k3,k4,k5,k6,k7,k8,k9', table.concat(order, ','))"))
  parse(hostile("assert(next == nil) assert(tostring({}) == 'table') assert(tostring(print or error) == 'function')"))
  refused("local s = string.format('%p', {})", "may not format addresses")
  refused("local s = string.format('%s', {})", "may format numbers and text")
  parse(hostile("assert(string.format('%d of p', 3) == '3 of p')"))
  refused("for k in pairs{[{}] = 1} do end", "keyed by numbers and text only")
end)
s:test("math offers only what IEEE arithmetic defines exactly", function()
  parse(hostile("assert(math.sin == nil and math.exp == nil and math.log == nil and math.pow == nil) " ..
                "assert(math.sqrt(16) == 4 and math.floor(2.5) == 2 and math.ldexp(1, 3) == 8)"))
end)
s:test("no address or hash order through a spoofed metatable, foreach or the host's string", function()
  parse(hostile("local t = setmetatable({}, {__metatable = {__tostring = true}}) assert(tostring(t) == 'table', tostring(t))"))
  parse(hostile("assert(table.foreach == nil and table.foreachi == nil)"))
  -- Replacing an entry of the source's string changes nothing of the host's own checks.
  refused("string.match = function() return true end local m = vt.nn.Sequential{} m:add('a.b', vt.nn.ReLU())",
          "a child's name is letters")
end)
s:test("the text string functions scan in one build is bounded", function()
  refused("local s = ('a'):rep(256) for i = 1, 10000 do s:match('a+') end", "at most 2^28 bytes of text")
end)
s:test("patterns that backtrack for ages are refused before they run", function()
  local t0 = vt.clock()
  refused("string.find(('a'):rep(1000), '.-.-.-.-b')", "one repetition")
  refused("local m = ('a'):rep(300):match('a+')", "at most 256 bytes")
  T.assert_true(vt.clock() - t0 < 10, "took " .. (vt.clock() - t0) .. " s")
  parse(hostile("assert(('16,8'):gmatch('[^,]+')() == '16') assert(('abc'):find('b', 1, true) == 2)"))
end)
s:test("sizes given other ways are limited too", function()
  refused("local t = vt.tensor.zeros(2^13, 2^13, 2)", "at most 2^26 elements")
  refused("local s = ('x'):rep('1073741824')", "at most 2^24 bytes")
  -- Rows that are one shared table: the outer length alone said 8192.
  refused("local row = {} for i = 1, 8193 do row[i] = 0 end local m = {} for i = 1, 8192 do m[i] = row end " ..
          "local t = vt.tensor(m)", "at most 2^26 elements")
end)
s:test("vt.nn.model (which reads files) is not in a source's vt.nn", function()
  refused("local m = vt.nn.model{file = '/etc/hostname'}", "attempt to call field 'model'")
  refused("local m = vt.nn._build('return 1', {})", "attempt to call field '_build'")
end)
s:test("vt.nn.model runs a source in a state of its own, never in the caller's", function()
  local path = tmp .. "/preview"
  T.assert_error(function() vt.nn.model{source = "vt.tensor({1}):save('" .. path .. "')" .. HONEST} end,
                 "cannot write files", true)
  T.assert_false(vt.fs.exists(path))
  T.assert_error(function() vt.nn.model{source = "while true do end" .. HONEST} end, "ran past its budget", true)
  local format = string.format
  T.assert_error(function() vt.nn.model{source = "getmetatable('').__index.format = nil" .. HONEST} end,
                 "attempt to index", true)
  T.assert_eq(string.format, format)
  local m = vt.nn.model{source = HONEST}
  T.assert_eq(m.module:parameter_count(), 10)
  T.assert_true(tostring(m):find("Linear", 1, true) ~= nil, tostring(m))
end)
s:test("what a source returns is checked, not trusted by the host", function()
  local bad = "local M = vt.nn.Module{kind = 'Bad', init = function(self) self.fc = vt.nn.Linear(4, 2) end, " ..
              "forward = function(self, x) return self.fc(x) end, " ..
              "describe = function(self) if ('').dump == nil then return {} end return 'Bad' end} return M()"
  T.assert_error(function() parse(bad) end, "describe() must be text", true)
  -- A table nested deeper than a tensor's 64 dimensions (the host's walk recursed per level).
  refused("local t = {1} for i = 1, 60000 do t = {t} end vt.tensor(t)", "more than 64 levels")
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
