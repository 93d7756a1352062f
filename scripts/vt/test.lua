-- A small test harness for Lua tests run by vtrun under ctest.
--
--   local T = require "vt.test"
--   local suite = T.suite("tensor")
--   suite:test("sum", function() T.assert_eq(vt.tensor{1, 2}:sum(), 3) end)
--   T.run()   -- prints one line per test and "N passed, N failed"; exits 1 on failure
--
-- `vtrun file_test.lua PATTERN` runs only the tests whose "suite: name" contains PATTERN.
local pretty = require "vt.pretty"

local M = {}
local suites = {}

local Suite = {}
Suite.__index = Suite

-- A named group of tests, run in the order they were added.
function M.suite(name)
  assert(type(name) == "string", "vt.test.suite: name must be a string")
  local s = setmetatable({name = name, tests = {}}, Suite)
  suites[#suites + 1] = s
  return s
end

function Suite:test(name, fn)
  assert(type(name) == "string", "vt.test: test name must be a string")
  assert(type(fn) == "function", "vt.test: test body must be a function")
  self.tests[#self.tests + 1] = {name = name, fn = fn}
  return self
end

local function is_tensor(v)
  return vt ~= nil and vt.tensor ~= nil and vt.tensor.is_tensor(v)
end

local function describe(v)
  if is_tensor(v) then return "\n" .. tostring(v) end
  return pretty.format(v)
end

local function fail(message, level)
  error(message, (level or 1) + 2)
end

-- Deep equality: tensors bitwise (same dtype, shape and bytes), tables by content.
local function deep_equal(a, b, seen)
  if is_tensor(a) or is_tensor(b) then
    return is_tensor(a) and is_tensor(b) and a:equal(b)
  end
  if type(a) ~= type(b) then return false end
  if type(a) ~= "table" then return a == b or (a ~= a and b ~= b) end
  if a == b then return true end
  seen = seen or {}
  if seen[a] == b then return true end
  seen[a] = b
  for k, v in pairs(a) do
    if not deep_equal(v, b[k], seen) then return false end
  end
  for k in pairs(b) do
    if a[k] == nil then return false end
  end
  return true
end
M.deep_equal = deep_equal

function M.assert_eq(actual, expected, message)
  if not deep_equal(actual, expected) then
    fail(string.format("%sexpected %s, got %s", message and (message .. ": ") or "",
                       describe(expected), describe(actual)))
  end
end

function M.assert_ne(actual, unexpected, message)
  if deep_equal(actual, unexpected) then
    fail(string.format("%sexpected a value other than %s", message and (message .. ": ") or "",
                       describe(unexpected)))
  end
end

-- |actual - expected| <= tol for numbers, or the largest elementwise difference for tensors.
function M.assert_near(actual, expected, tol, message)
  tol = tol or 1e-9
  local diff
  if is_tensor(actual) or is_tensor(expected) then
    if not (is_tensor(actual) and is_tensor(expected)) then
      fail("assert_near: cannot compare a tensor with a " .. type(is_tensor(actual) and expected or actual))
    end
    local ok, d = pcall(function() return (actual:double() - expected:double()):abs():max() end)
    if not ok then fail("assert_near: " .. tostring(d)) end
    diff = d
  elseif type(actual) == "number" and type(expected) == "number" then
    diff = math.abs(actual - expected)
  else
    fail(string.format("assert_near: numbers or tensors expected, got %s and %s", type(actual), type(expected)))
  end
  if not (diff <= tol) then
    fail(string.format("%sexpected %s within %g, got %s (difference %g)", message and (message .. ": ") or "",
                       describe(expected), tol, describe(actual), diff))
  end
end

function M.assert_true(v, message)
  if not v then fail((message and (message .. ": ") or "") .. "expected a true value, got " .. describe(v)) end
end

function M.assert_false(v, message)
  if v then fail((message and (message .. ": ") or "") .. "expected a false value, got " .. describe(v)) end
end

-- fn() must raise an error whose message matches the Lua pattern `pattern` (or contains it
-- literally when `plain` is true). Returns the message.
function M.assert_error(fn, pattern, plain)
  local ok, err = pcall(fn)
  if ok then fail("expected an error matching '" .. tostring(pattern) .. "', but none was raised") end
  local msg = tostring(err)
  if pattern ~= nil and not msg:find(pattern, 1, plain) then
    fail(string.format("expected an error matching '%s', got '%s'", pattern, msg))
  end
  return msg
end

-- Wall-clock seconds (vt.clock), so a test that waits on a child process shows its time.
local function clock()
  return vt and vt.clock and vt.clock() or os.clock()
end

-- Runs every suite (filtered by the first script argument, if any), prints results and the
-- closing "N passed, N failed" line, runs `cleanup` (a function, if given; e.g. removing the
-- script's temporary directory), and exits 1 if any test failed (when `exit` is not false).
-- A run in which no test ran (a filter that matches nothing, an empty suite) counts as one
-- failure: a green result must mean tests passed.
function M.run(opts)
  opts = opts or {}
  local filter = opts.filter or (arg and arg[1])
  local passed, failed, total = 0, 0, 0
  for _, s in ipairs(suites) do
    total = total + #s.tests
    for _, t in ipairs(s.tests) do
      local full = s.name .. ": " .. t.name
      if filter == nil or full:find(filter, 1, true) then
        local start = clock()
        local ok, err = xpcall(t.fn, debug.traceback)
        local took = clock() - start
        if ok then
          passed = passed + 1
          io.write(string.format("ok    %s (%.2f s)\n", full, took))
        else
          failed = failed + 1
          io.write(string.format("FAIL  %s\n      %s\n", full, tostring(err):gsub("\n", "\n      ")))
        end
        io.flush()
      end
    end
  end
  if passed + failed == 0 then
    failed = 1
    io.write(string.format("FAIL  no test ran (%s of %d tests)\n",
                           filter and ("the filter '" .. filter .. "' matched none") or "none defined", total))
  end
  io.write(string.format("%d passed, %d failed\n", passed, failed))
  io.flush()
  suites = {}
  if opts.cleanup ~= nil then opts.cleanup() end
  if opts.exit ~= false then os.exit(failed == 0 and 0 or 1) end
  return passed, failed
end

return M
