-- vt.fs: directories made, listed, measured and removed without a shell (paths with quotes
-- and spaces included), and errors that name the path.
local T = require "vt.test"
local s = T.suite("fs")

s:test("make, list, measure and remove a tree whose names need no quoting", function()
  local root = vt.fs.tmpdir("fs test")
  T.assert_eq(vt.fs.exists(root), "directory")
  T.assert_eq(vt.fs.list(root), {})
  local odd = root .. "/it's a \"dir\"; rm -rf x"
  vt.fs.mkdir(odd .. "/deeper")
  vt.fs.mkdir(odd)  -- exists already: nothing
  local f = assert(io.open(odd .. "/deeper/file", "wb"))
  f:write(string.rep("x", 1000))
  f:close()
  T.assert_eq(vt.fs.list(root), {"it's a \"dir\"; rm -rf x"})
  T.assert_eq(vt.fs.exists(odd .. "/deeper/file"), "file")
  T.assert_eq(vt.fs.size(root), 1000)
  T.assert_eq(vt.fs.size(odd .. "/deeper/file"), 1000)
  T.assert_eq(vt.fs.remove(odd), 3)
  T.assert_eq(vt.fs.exists(odd), nil)
  T.assert_eq(vt.fs.remove(odd), 0)
  local inner = vt.fs.tmpdir("work", root .. "/given")
  T.assert_true(inner:find(root .. "/given/work.", 1, true) == 1, inner)
  T.assert_eq(vt.fs.list(inner), {})
  T.assert_eq(vt.fs.remove(root), 3)
end)

s:test("errors name the path; the root is never removed", function()
  T.assert_error(function() vt.fs.list("/no/such/dir") end, "vt.fs.list: cannot list directory '/no/such/dir'", true)
  T.assert_error(function() vt.fs.remove("/") end, "refusing to remove '/'", true)
  T.assert_error(function() vt.fs.remove("") end, "refusing to remove ''", true)
  T.assert_error(function() vt.fs.tmpdir("a/b") end, "the prefix is a name, not a path", true)
  local root = vt.fs.tmpdir()
  local f = assert(io.open(root .. "/file", "w"))
  f:close()
  T.assert_error(function() vt.fs.mkdir(root .. "/file") end, "cannot make directory '" .. root .. "/file'", true)
  vt.fs.remove(root)
end)

local _, failed = T.run({exit = false})
os.exit(failed == 0 and 0 or 1)
