-- vt.process: children that exchange lines with this process, their environment, and the
-- errors a caller can cause.
local T = require "vt.test"

local s = T.suite("process")

s:test("a child echoes lines and exits with its status", function()
  local p = vt.process.spawn{vt.executable(), "-e", "print(io.read('*l') .. '!'); os.exit(3)"}
  p:send("hello")
  T.assert_eq(p:receive(30), "hello!")
  local line, why = p:receive(30)
  T.assert_eq(line, nil)
  T.assert_eq(why, "closed")
  T.assert_eq(p:wait(30), 3)
end)

s:test("env sets variables over this process's environment, the last of a name winning", function()
  local code = "print(os.getenv('VT_PROCESS_A'), os.getenv('VT_PROCESS_B'), os.getenv('HOME') ~= nil)"
  local p = vt.process.spawn({vt.executable(), "-e", code},
                             {env = {"VT_PROCESS_A=1", "VT_PROCESS_B=x", "VT_PROCESS_A=2"}})
  T.assert_eq(p:receive(30), "2\tx\ttrue")
  T.assert_eq(p:wait(30), 0)
end)

s:test("a program that cannot run is an error naming it, not a child that exits", function()
  T.assert_error(function() vt.process.spawn{"/nonexistent/vt-no-such-program"} end,
                 "vt.process.spawn: cannot run '/nonexistent/vt-no-such-program': No such file or directory", true)
  T.assert_error(function() vt.process.spawn{} end, "argv must name a program", true)
  T.assert_error(function() vt.process.spawn({"true"}, {env = {"NOEQUALS"}}) end, "NAME=value", true)
end)

s:test("many children in turn leave this process working (spawned, read, reaped, collected)", function()
  for i = 1, 20 do
    local p = vt.process.spawn{vt.executable(), "-e", "print(" .. i .. ")"}
    T.assert_eq(p:receive(30), tostring(i))
    T.assert_eq(p:wait(30), 0)
    p = nil
    collectgarbage()
  end
end)

local _, failed = T.run({exit = false})
os.exit(failed == 0 and 0 or 1)
