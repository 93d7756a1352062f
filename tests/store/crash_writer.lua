-- Writer for the crash-safety test (tests/store/crash_test.cc) and the reader test
-- (process_test.cc): appends a deterministic run "crash" to the store in DIR, resuming from
-- the last checkpoint after being killed. Prints "ready" once the store is open and rolled
-- back, "done <root>" at the end.
--
--   vtrun tests/store/crash_writer.lua DIR SEED [STEPS] [K] [PAUSE_MS] [HOLD_AT] [UNLOGGED]
--
-- Every byte depends only on (SEED, step or leaf), so an interrupted and resumed run must end
-- with the same root as an uninterrupted one. PAUSE_MS (default 0) sleeps after each step,
-- for a slow writer that readers can watch. HOLD_AT: after step HOLD_AT (and its checkpoint,
-- if one is due) print "holding" and sleep until killed, with the store still open, so a
-- test can kill the writer at a known point (reliability_test.cc). UNLOGGED: the store's
-- unlogged_step_bytes (0: every step skips the write-ahead log).
local dir = assert(arg[1], "usage: crash_writer.lua DIR SEED [STEPS] [K] [PAUSE_MS] [HOLD_AT] [UNLOGGED]")
local seed = assert(tonumber(arg[2]), "SEED must be a number")
local n = tonumber(arg[3] or "240")
local k = tonumber(arg[4] or "7")
local pause_ms = tonumber(arg[5] or "0")
local hold_at = tonumber(arg[6] or "-1")
local unlogged = arg[7] and tonumber(arg[7])
local sha = vt.store.sha256

-- `len` deterministic bytes derived from `tag` (hex text of a SHA-256 chain).
local function bytes(tag, len)
  local parts, h, total = {}, sha(tag), 0
  while total < len do
    h = sha(h)
    parts[#parts + 1] = h
    total = total + #h
  end
  return table.concat(parts):sub(1, len)
end

local function size_of(tag, lo, span)
  return lo + tonumber(sha(tag):sub(1, 6), 16) % span
end

local function records(step)
  local out = {}
  for j = 1, 4 do
    for _, dir_name in ipairs({"fwd", "bwd"}) do
      local boundary = string.format("layer%d.fc:%s", j, dir_name)
      local tag = string.format("%d/%d/%s", seed, step, boundary)
      out[#out + 1] = {boundary = boundary, call = 0, value = bytes(tag, size_of(tag, 100, 6000))}
    end
  end
  if step % 2 == 0 then
    out[#out + 1] = {boundary = "layer1.fc:fwd", call = 1, value = bytes(seed .. "/" .. step .. "/extra", 333)}
  end
  return out
end

local function int64_le(v)
  local b = {}
  for i = 1, 8 do
    b[i] = string.char(v % 256)
    v = math.floor(v / 256)
  end
  return table.concat(b)
end

local function checkpoint(leaf, step)
  return {
    {name = "layer1.weight", dtype = "float32", data = bytes(seed .. "/ckpt/" .. leaf, 256 * 1024)},
    {name = "layer1.bias", dtype = "float32", shape = {16}, data = bytes(seed .. "/bias/" .. leaf, 64)},
    {name = "step", dtype = "int64", shape = {}, data = int64_le(step)},
  }
end

local total_leaves = n == 0 and 1 or math.floor((n - 1) / k) + 2
local function leaf_step(i)
  if i == total_leaves - 1 then return n end
  return i * k
end

local ffi = require "ffi"
pcall(ffi.cdef, "int usleep(unsigned int usec);")
local function sleep_ms(ms)
  if ms > 0 then ffi.C.usleep(ms * 1000) end
end

local store = vt.store.open(dir, {unlogged_step_bytes = unlogged})
local run = store:run("crash")
if run == nil then
  run = store:create_run("crash", {spec = string.format("crash-writer seed=%d n=%d k=%d", seed, n, k),
                                   checkpoint_every = k, steps = n})
end
local last_leaf, step = run:rollback()
local next_leaf = last_leaf == nil and 0 or last_leaf + 1
io.write("ready\n")
io.flush()

if next_leaf == 0 then
  run:put_checkpoint(0, checkpoint(0, 0))
  next_leaf, step = 1, 0
end
for s = step + 1, n do
  run:write_step(s, records(s))
  if s == leaf_step(next_leaf) then
    run:put_checkpoint(next_leaf, checkpoint(next_leaf, s))
    next_leaf = next_leaf + 1
  end
  sleep_ms(pause_ms)
  if s == hold_at then
    io.write("holding\n")
    io.flush()
    while true do sleep_ms(1000) end
  end
end
io.write("done " .. run:root() .. "\n")
store:close()
