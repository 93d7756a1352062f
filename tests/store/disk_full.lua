-- Writer for the disk-full test (reliability_test.cc), run on a small tmpfs: writes steps of
-- 256 KiB until a write fails, fills what space is left, then closes, reopens, writes again
-- and creates a second store on the full disk. Every failure must be a Lua error (printed),
-- never an abort. Then it frees the space and checks that every step whose write returned
-- is still there ("intact N steps"); the last line is "survived" if the process got there.
-- With "open", it writes a small store, fills the disk, then reopens that store and creates
-- another one on the full disk.
--
--   vtrun tests/store/disk_full.lua DIR [open]
local dir = assert(arg[1], "usage: disk_full.lua DIR [open]")
local filler = dir .. "-filler"

local function try(what, f, ...)
  local ok, err = pcall(f, ...)
  print(what .. ": " .. (ok and "ok" or tostring(err)))
  return ok, err
end

-- Whatever space is left (a failed flush may free some), filler files take, 512 bytes at a
-- time; called before each step on the full disk.
local fillers = 0
local function fill()
  fillers = fillers + 1
  local f = assert(io.open(filler .. fillers, "wb"))
  f:setvbuf("no")
  local block = string.rep("f", 512)
  while f:write(block) do end
  f:close()
end

if arg[2] == "open" then
  local store = vt.store.open(dir, {compression = "none"})
  local run = store:create_run("r", {spec = "s", checkpoint_every = 1000000, steps = 1000000})
  run:put_checkpoint(0, {{name = "w", dtype = "float32", shape = {1}, data = "\0\0\0\0"}})
  for s = 1, 4 do run:write_step(s, {{boundary = "x:fwd", call = 0, value = string.rep("v", 65536)}}) end
  store:close()
  fill()
  local ok, reopened = try("reopen on a full disk", vt.store.open, dir)
  if ok then try("close", reopened.close, reopened) end
  fill()
  local created, fresh = try("create on a full disk", vt.store.open, dir .. "-new")
  if created then try("close new", fresh.close, fresh) end
  for i = 1, fillers do os.remove(filler .. i) end
  local after = vt.store.open(dir)
  assert(after:run("r"):info().steps_written == 4, "lost steps")
  assert(after:verify().ok, "verify")
  after:close()
  print("intact after freeing space")
  print("survived")
  return
end

local store = vt.store.open(dir, {compression = "none"})
local run = store:create_run("full", {spec = "disk-full", checkpoint_every = 1000000, steps = 1000000})
run:put_checkpoint(0, {{name = "w", dtype = "float32", shape = {1}, data = "\0\0\0\0"}})
local written = 0
for s = 1, 100000 do
  local value = string.rep(string.format("%08d", s), 32 * 1024)  -- 256 KiB, distinct per step
  local ok, err = pcall(run.write_step, run, s, {{boundary = "x:fwd", call = 0, value = value}})
  if not ok then
    print("write error at step " .. s .. ": " .. tostring(err))
    break
  end
  written = s
end
assert(written < 100000, "the disk never filled up")

fill()
try("close", store.close, store)
fill()
local ok, reopened = try("reopen", vt.store.open, dir)
if ok then
  fill()
  try("write again", function()
    local r = reopened:run("full")
    r:write_step(r:info().steps_written + 1, {{boundary = "x:fwd", call = 0, value = string.rep("y", 65536)}})
  end)
  fill()
  try("close again", reopened.close, reopened)
end
fill()
local created, fresh = try("create", vt.store.open, dir .. "-new")
if created then try("close new", fresh.close, fresh) end

-- Space again: nothing whose write returned is lost.
for i = 1, fillers do os.remove(filler .. i) end
os.execute("rm -rf '" .. dir .. "-new'")
local after = vt.store.open(dir)
local info = after:run("full"):info()
assert(info.steps_written >= written, "lost steps: " .. info.steps_written .. " of " .. written)
for s = 1, written do
  local records = after:run("full"):step(s)
  assert(records[1].value == string.rep(string.format("%08d", s), 32 * 1024), "step " .. s .. " differs")
end
local report = after:verify()
assert(report.ok, "verify: " .. tostring(report.problems[1] and report.problems[1].message))
after:close()
print("intact " .. written .. " steps")
print("survived")
