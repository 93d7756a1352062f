-- The Lua test harness itself: assertions, failure reporting, the closing line, exit status.
local T = require "vt.test"
local s = T.suite("harness")

local vtrun = arg[-1]  -- the interpreter running this file

s:test("assert_eq compares tables deeply and tensors bitwise", function()
  T.assert_eq({1, {2, 3}, x = {y = "z"}}, {1, {2, 3}, x = {y = "z"}})
  T.assert_error(function() T.assert_eq({1, 2}, {1, 3}) end, "expected {1, 3}, got {1, 2}", true)
  T.assert_eq(vt.tensor{1, 2}, vt.tensor{1, 2})
  T.assert_error(function() T.assert_eq(vt.tensor{1, 2}, vt.tensor{1, 2.5}) end, "expected")
end)

s:test("assert_near uses an absolute tolerance", function()
  T.assert_near(1.0, 1.0 + 1e-12, 1e-9)
  T.assert_near(vt.tensor{1, 2}, vt.tensor{1, 2 + 1e-12}, 1e-9)
  T.assert_error(function() T.assert_near(1.0, 1.1, 1e-3) end, "difference", true)
end)

s:test("assert_error checks that an error matching the pattern was raised", function()
  T.assert_error(function() error("boom 42") end, "boom %d+")
  T.assert_error(function() T.assert_error(function() end, "x") end, "none was raised", true)
  T.assert_error(function() T.assert_error(function() error("abc") end, "xyz", true) end,
                 "expected an error matching 'xyz'", true)
end)

s:test("a failing suite prints its failures, the closing line, and exits 1", function()
  local path = os.tmpname()
  local f = io.open(path, "w")
  f:write([[
local T = require "vt.test"
local s = T.suite("demo")
s:test("passes", function() T.assert_eq(1, 1) end)
s:test("fails", function() T.assert_eq(1, 2) end)
T.run()
]])
  f:close()
  local p = io.popen(string.format("%q %q 2>&1; echo \"exit=$?\"", vtrun, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  T.assert_true(out:find("ok    demo: passes", 1, true) ~= nil, out)
  T.assert_true(out:find("FAIL  demo: fails", 1, true) ~= nil, out)
  T.assert_true(out:find("expected 2, got 1", 1, true) ~= nil, out)
  T.assert_true(out:find("\n1 passed, 1 failed\n", 1, true) ~= nil, out)
  T.assert_true(out:find("exit=1", 1, true) ~= nil, out)
end)

s:test("cleanup runs after the tests and before the exit, also when a test fails", function()
  local path, marker = os.tmpname(), os.tmpname()
  os.remove(marker)
  local f = io.open(path, "w")
  f:write(string.format([[
local T = require "vt.test"
local s = T.suite("demo")
s:test("fails", function() T.assert_eq(1, 2) end)
T.run{cleanup = function() local m = io.open(%q, "w"); m:write("cleaned"); m:close() end}
]], marker))
  f:close()
  local p = io.popen(string.format("%q %q 2>&1; echo \"exit=$?\"", vtrun, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  local m = io.open(marker)
  T.assert_true(m ~= nil, "cleanup did not run: " .. out)
  T.assert_eq(m:read("*a"), "cleaned")
  m:close()
  os.remove(marker)
  T.assert_true(out:find("exit=1", 1, true) ~= nil, out)
end)

s:test("a filter argument runs only matching tests", function()
  local path = os.tmpname()
  local f = io.open(path, "w")
  f:write([[
local T = require "vt.test"
local s = T.suite("demo")
s:test("alpha", function() end)
s:test("beta", function() error("should not run") end)
T.run()
]])
  f:close()
  local p = io.popen(string.format("%q %q alpha 2>&1; echo \"exit=$?\"", vtrun, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  T.assert_true(out:find("1 passed, 0 failed", 1, true) ~= nil, out)
  T.assert_true(out:find("exit=0", 1, true) ~= nil, out)
end)

s:test("a filter that matches nothing fails the run: green must mean tests passed", function()
  local path = os.tmpname()
  local f = io.open(path, "w")
  f:write([[
local T = require "vt.test"
local s = T.suite("demo")
s:test("alpha", function() end)
T.run()
]])
  f:close()
  local p = io.popen(string.format("%q %q nosuchtest 2>&1; echo \"exit=$?\"", vtrun, path))
  local out = p:read("*a")
  p:close()
  os.remove(path)
  T.assert_true(out:find("no test ran (the filter 'nosuchtest' matched none of 1 tests)", 1, true) ~= nil, out)
  T.assert_true(out:find("exit=1", 1, true) ~= nil, out)
end)

s:test("pretty printing indents nested tables and marks cycles", function()
  local pretty = vt.pretty
  T.assert_eq(pretty.format({1, 2, a = "x"}), '{1, 2, a = "x"}')
  local long = {}
  for i = 1, 30 do long["key" .. i] = {i, i * 2} end
  local text = pretty.format(long)
  T.assert_true(text:find("\n  key1 = {1, 2},", 1, true) ~= nil, text)
  local cyc = {}
  cyc.self = cyc
  T.assert_true(pretty.format(cyc):find("<cycle", 1, true) ~= nil)
end)

s:test("REPL completion lists globals, fields and methods", function()
  local repl = vt.repl
  T.assert_eq(repl.complete("vt.ten"), {"vt.tensor"})
  T.assert_eq(repl.complete("vt.tensor.ze"), {"vt.tensor.zeros"})
  _G.some_tensor_for_completion = vt.tensor{1}
  T.assert_eq(repl.complete("some_tensor_for_completion:su"),
              {"some_tensor_for_completion:sub", "some_tensor_for_completion:sum"})
  _G.some_tensor_for_completion = nil
  local g = repl.complete("pri")
  T.assert_eq(g, {"print"})
  T.assert_eq(repl.complete("whi"), {"while"})
  T.assert_eq(repl.complete("nosuchthing.x"), {})
end)

T.run()
