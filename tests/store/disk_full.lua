-- Writer for the disk-full test (reliability_test.cc), run on a small tmpfs: writes steps of
-- 256 KiB until a write fails, then closes and reopens the store. Every failure must be a
-- Lua error (printed), never an abort; the last line is "survived" if the process got there.
--
--   vtrun tests/store/disk_full.lua DIR
local dir = assert(arg[1], "usage: disk_full.lua DIR")

local function try(what, f, ...)
  local ok, err = pcall(f, ...)
  print(what .. ": " .. (ok and "ok" or tostring(err)))
  return ok, err
end

local store = vt.store.open(dir, {compression = "none"})
local run = store:create_run("full", {spec = "disk-full", checkpoint_every = 1000000, steps = 1000000})
run:put_checkpoint(0, {{name = "w", dtype = "float32", shape = {1}, data = "\0\0\0\0"}})
local failed = false
for s = 1, 100000 do
  local value = string.rep(string.format("%08d", s), 32 * 1024)  -- 256 KiB, distinct per step
  local ok, err = pcall(run.write_step, run, s, {{boundary = "x:fwd", call = 0, value = value}})
  if not ok then
    print("write error at step " .. s .. ": " .. tostring(err))
    failed = true
    break
  end
end
assert(failed, "the disk never filled up")
try("close", store.close, store)
-- Opening a writer on the full disk: an error or a store, never an abort.
local ok, reopened = try("reopen", vt.store.open, dir)
if ok then try("close again", reopened.close, reopened) end
print("survived")
