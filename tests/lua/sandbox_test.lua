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
                "local order = {} for k in pairs(t) do order[len(order) + 1] = tostring(k) end " ..
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
  refused("local t = vt.tensor.zeros(8192, 8192, 2)", "at most 2^26 elements")
  -- (no elements, but 2^40 rows for totable to make)
  refused("local t = vt.tensor.zeros{1099511627776, 0}", "at most 2^26 elements")
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


-- A model whose forward runs `code` (`setup` runs while building), after a linear layer.
local function with_forward(setup, code)
  return setup .. " local M = vt.nn.Module{kind = 'K', forward = function(self, x) " .. code ..
         " return x end} return vt.nn.Sequential{vt.nn.Linear(4, 2), M()}"
end
local KEPT = "changed what the model keeps between calls"
s:test("a forward that changes what the model keeps between calls is refused, naming it", function()
  -- A counter in an upvalue let a cheating trainer restart before the interval it wanted to
  -- change, so that the judge (who starts from a checkpoint) agreed with it and convicted the
  -- honest auditor. Every way to keep something is refused where the forward changes it.
  local cases = {
    {"local calls = 0", "calls = calls + 1", "(its upvalue 'calls')"},
    {"", "n = (n or 0) + 1", "the source's globals.n (added)"},
    {"", "self.seen = true", ".seen (added)"},
    {"local t = {1, 2}", "t[1] = nil", "[1] (removed)"},
    {"local cfg = {scale = 1}", "cfg.scale = cfg.scale * 2", ".scale"},
    {"local cfg = {}", "cfg.inner = {}", ".inner (added)"},
    {"local cfg = {0}", "cfg[1] = -cfg[1]", "[1]"},  -- -0 is not 0: 1/x tells them apart
    {"", "getmetatable(self).__index.extra = 1", ".extra (added)"},  -- the class, the host's table
    {"", "vt.nn.ReLU = vt.nn.GELU", ".ReLU"},
    {"local buf = vt.tensor.zeros{2}", "buf[1] = buf[1] + 1", "(a tensor's"},
    -- through views of it: another userdata, the same storage
    {"local buf = vt.tensor.zeros{2}", "buf:reshape{2, 1}[2] = 5", "(a tensor's"},
    {"local buf = vt.tensor{1, 2}", "buf:reshape{1, 2}:zero()", "(a tensor's"},
    -- a write that puts the bytes back (its version shows it), and a graph it now carries
    {"local buf = vt.tensor{1, 2}", "buf[1] = 7 buf[1] = 1", "(a tensor's layout, version or graph)"},
    {"local buf = vt.tensor.zeros{1}", "buf:copy(x:narrow(2, 1, 1):narrow(1, 1, 1):reshape{1}:mul(0))",
     "(a tensor's"},
    -- an iterator's position (the library's gmatch kept it in a C closure, out of sight)
    {"local it = ('abcdef'):gmatch('.')", "local c = it()", "(its upvalue 'pos')"},
    -- a table's layout: the same entries, another length (a rehash moved 4 into the array)
    {"local K = {1, 2} K[0.5] = 1 K[1.5] = 1 K[2.5] = 1 K[4] = 4",
     "K[5.5] = true K[5.5] = nil", "(its length, #)"},
    {"local mt = {} local t = setmetatable({}, mt)", "mt.__index = {} local _ = t",
     ".__index (added)"},
    {"local t = setmetatable({}, {})", "setmetatable(t, nil)", "(its metatable)"},
  }
  for _, c in ipairs(cases) do
    local ok, err = pcall(parse, with_forward(c[1], c[2]), true)
    T.assert_false(ok, c[2] .. ": accepted")
    T.assert_true(err:find(KEPT, 1, true) ~= nil and err:find(c[3], 1, true) ~= nil, c[2] .. ": " .. err)
  end
end)
s:test("a forward may compute with temporaries and read what building made", function()
  -- (the control: the check refuses changes, not reads, and forgets what a call made and dropped)
  local source = with_forward("local scale = {2, 3} local mask = vt.tensor{1, 0} local k = 0",
    "local t = {} for i = 1, 8 do t[i] = {i, scale[2]} end local y = vt.tensor.zeros{3} y[1] = scale[2] " ..
    "y:zero() local m = mask:reshape{2, 1} assert(m ~= nil and k == 0) absent = nil " ..
    "scale[1] = 5 scale[1] = 2")
  local spec = vt.spec{model = vt.nn.model{source = source}, data = data, steps = 3, batch = 4}
  local t = vt.trainer{spec = vt.spec.parse(spec:canonical()), data = data, mode = "fp64"}
  for _ = 1, 3 do t:step() end
end)
s:test("a forward that changes it on some batches only fails there, for every party alike", function()
  -- (vt.spec's look at the model runs one example; the steps run batches of 4)
  local source = with_forward("local flags = {}", "if x:shape()[1] == 4 then flags.on = true end")
  local parsed = parse(source)
  T.assert_error(function() vt.trainer{spec = parsed, data = data, mode = "fp64"}:step() end, KEPT, true)
end)
s:test("a forward that changed what the model keeps and failed ends the model's forwards", function()
  -- An evaluation (which the auditor never runs) leaves a flag and fails; the next training
  -- forward reads the flag and clears it before the check: it would have steered the step
  -- unseen. So would one that returned and was refused.
  for _, ending in ipairs{"error('evaluation batch')", "return x"} do
    local source = with_forward("local st = {}",
      "if x:shape()[1] == 3 then st.on = true " .. ending .. " end local on = st.on st.on = nil")
    local spec = vt.spec{model = vt.nn.model{source = source}, data = data, steps = 2, batch = 4}
    local t = vt.trainer{spec = vt.spec.parse(spec:canonical()), data = data, mode = "fp64"}
    t:step()
    T.assert_false(pcall(t.evaluate, t, data, {limit = 3, batch = 3}))
    T.assert_error(function() t:step() end, "runs no more forwards", true)
  end
end)
s:test("a stateless forward that failed leaves the model usable", function()
  -- (the string work its failed call counted was left in an upvalue, and refused as kept)
  local source = with_forward("", "local _ = ('relu'):find('l', 1, true) assert(x:shape()[1] ~= 3, 'odd batch')")
  local spec = vt.spec{model = vt.nn.model{source = source}, data = data, steps = 2, batch = 4}
  local t = vt.trainer{spec = vt.spec.parse(spec:canonical()), data = data, mode = "fp64"}
  t:step()
  T.assert_false(pcall(t.evaluate, t, data, {limit = 3, batch = 3}))
  t:step()
end)
s:test("gmatch in a source matches as Lua's", function()
  parse(hostile("local out = {} for a, b in ('k=1, v=2'):gmatch('(%w)=(%w)') do out[len(out) + 1] = a .. b end " ..
                "assert(table.concat(out, ' ') == 'k1 v2') local n = 0 for _ in ('abc'):gmatch('x*') do n = n + 1 end " ..
                "assert(n == 4, n) for w in ('16,8'):gmatch('[^,]+') do n = n + 1 end assert(n == 6)"))
  refused("for w in ('abc'):gmatch('^a') do end", "may not start a gmatch pattern with ^")
end)
s:test("# (a table's layout, which differs between processes) is refused; len counts to the first nil", function()
  -- A red-team source built tables with holes in a forward and multiplied by how many had
  -- #t == 2: two runs of one spec gave different checkpoints.
  refused("local t = {1, 2} local n = #t", "line 1 uses #")
  T.assert_error(function() parse("local t = {}\nt[#t + 1] = 1" .. HONEST) end, "line 2 uses #", true)
  parse(hostile("local t = {1, 2, nil, 4} assert(len(t) == 2 and len('abc') == 3 and ('abc'):len() == 3) " ..
                "local s = select('#', 1, 2) assert(s == 2) --[[ # in text and comments is no operator ]]"))
  -- The table functions that take # refuse a table with holes (or keys past them).
  refused("local t = {1, 2} t[4] = 4 table.insert(t, 5)", "only tables without holes")
  refused("local t = {1, 2} t[2.5] = 0 local s = table.concat(t, ',')", "only tables without holes")
  refused("local t = {1, nil, 3} local a, b = unpack(t)", "only tables without holes")
  parse(hostile("local t = {3, 1, 2} table.sort(t) table.insert(t, 4) assert(table.concat(t, ',') == '1,2,3,4') " ..
                "assert(table.remove(t) == 4 and table.getn(t) == 3 and select(3, unpack(t)) == 3)"))
  -- vt.tensor and indexing read a table up to its first nil, as len does.
  parse(hostile("local t = {1, 2} t[4] = 4 assert(vt.tensor(t):shape()[1] == 2) " ..
                "assert(vt.tensor.zeros{2, 3}[{2}]:shape()[1] == 3)"))
end)
s:test("work outside the instruction budget is bounded too", function()
  -- A string doubled 40 times copies 2^40 bytes in 40 instructions, and `..` has no hook;
  -- the state's allocator counts what one build or forward allocates.
  local t0 = vt.clock()
  refused("local s = 'x' for i = 1, 40 do s = s .. s end", "more than 1 GiB of Lua memory")
  -- a tensor method on a large tensor is one instruction (x:fill on 2^24 values: 7 ms)
  refused("local t = vt.tensor.zeros{16777216} for i = 1, 2000 do local r = t:reshape{4096, 4096} end",
          "at most 2^34 tensor values")
  T.assert_true(vt.clock() - t0 < 30, "took " .. (vt.clock() - t0) .. " s")
  -- Writing a tensor element by element is charged by what it writes, not the whole tensor
  -- (each write was charged 2^20 values, and an honest fill was refused after 16k writes).
  parse(hostile("local t = vt.tensor.zeros{1048576} for i = 1, 50000 do t[i] = i end"))
  -- and in a forward, where each call starts its counts afresh
  local source = with_forward("", "local s = 'x' for i = 1, 40 do s = s .. s end")
  T.assert_error(function() parse(source, true) end, "more than 1 GiB of Lua memory", true)
  parse(with_forward("", "local s = ('x'):rep(1000) for i = 1, 100 do s = s .. i end"), true)
end)
s:test("a source's own make cannot name a layer's path, or make one twice", function()
  local function maker(path)
    return "local K = vt.nn.Module{kind = 'K', init = function(self) self.l = vt.nn.Linear(4, 2) end, " ..
           "make = function(self) return setmetatable({_path = '" .. path .. "', _config = self.l._config}, " ..
           "getmetatable(self.l)):make() end, forward = function(self, x) return self.l(x) end} " ..
           "return vt.nn.Sequential{K()}"
  end
  T.assert_error(function() parse(maker("fc.weird name")) end, "letters, digits and '_' joined by dots", true)
  T.assert_error(function() parse(maker("a..b")) end, "letters, digits and '_' joined by dots", true)
  T.assert_error(function() parse(maker("0.l")) end, "two layers made at '0.l'", true)
end)
s:test("a weak table the model keeps is refused while building", function()
  -- (its entries vanish when the collector runs, which differs between processes)
  local ok, err = pcall(parse, with_forward("local cache = setmetatable({}, {__mode = 'k'})", "local _ = cache"))
  T.assert_false(ok)
  T.assert_true(err:find("weak table", 1, true) ~= nil and err:find("upvalue 'cache'", 1, true) ~= nil, err)
end)
s:test("layers are made while building, never in a forward", function()
  local source = "local M = vt.nn.Module{kind = 'K', init = function(self) self.l = vt.nn.Linear(2, 2) end, " ..
                 "forward = function(self, x) self.l:make() return self.l(x) end} " ..
                 "return vt.nn.Sequential{vt.nn.Linear(4, 2), M()}"
  T.assert_error(function() parse(source, true) end, "a layer is made while the model is built", true)
end)
s:test("^ (the C library's pow, which differs between machines) is refused, in code only", function()
  refused("local w = 2 ^ 3", "line 1 uses ^")
  T.assert_error(function() parse("local a = 1\nlocal b = 10^-3" .. HONEST) end, "line 2 uses ^", true)
  -- Constants are folded with pow while parsing, so even a `^` that leaves no bytecode counts.
  T.assert_error(function() parse("local _ = 2^0.5" .. HONEST) end, "uses ^", true)
  -- `^` in strings, long strings and comments is no operator.
  parse("local p = ('16,8'):match('[^,]+') -- x^2\n--[[ a^b ]] --[==[ ]] ^ ]==]\n" ..
        "local q = [=[^]]^]=] local r = \"\\\"^\" local u = '\\\\' .. \"\\\\\"" .. HONEST)
  -- An escaped backslash ends a string: the `^` after it is code.
  T.assert_error(function() parse("local s = \"a\\\\\" local w = 2^2" .. HONEST) end, "uses ^", true)
  T.assert_error(function() parse("local s = [[a]] local w = 2^2" .. HONEST) end, "uses ^", true)
  -- Lua ends a line (and a comment) at a carriage return too: the scan read on as comment.
  T.assert_error(function() parse("-- c\rlocal w = 2^0.5" .. HONEST) end, "line 2 uses ^", true)
  T.assert_error(function() parse("-- c\rlocal t = {1, 2} local n = #t" .. HONEST) end, "line 2 uses #", true)
  T.assert_error(function() parse("local a = 1\r\n-- x^2\r\nlocal c = 3 ^ 2" .. HONEST) end, "line 3 uses ^", true)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
