-- Store benchmark: log-record write throughput (with and without compression), checkpoint
-- hashing against raw single-core SHA-256 of the same bytes, and Merkle append / proof
-- times for 1M leaves (in memory and in the store). All measured in this one run.
--
--   vtrun scripts/bench/store.lua [quick=false] [log_mb=256] [hash_mb=256] [leaves=1000000] [dir=]
--
-- quick=true: log_mb=32 hash_mb=64 leaves=100000 where the command line does not set them.
--
-- The last line is one JSON object; `hash_ratio_to_sha256` (target >= 0.8) and
-- `log_write_mb_per_s` (64 KiB records, zstd, the store's default) are the headline numbers;
-- `log_dense_write_mb_per_s` is the same for the paper window's dense records (written
-- uncompressed: zstd does not shrink them).
local ffi = require "ffi"

local opts = vt.args({quick = false, log_mb = 256, hash_mb = 256, leaves = 1000000, dir = ""}, arg)
-- quick=true shrinks the sizes the command line leaves at their defaults.
local given = {}
for _, a in ipairs(arg or {}) do
  local key = tostring(a):match("^([%w_]+)=")
  if key then given[key] = true end
end
if opts.quick then
  for key, value in pairs{log_mb = 32, hash_mb = 64, leaves = 100000} do
    if not given[key] then opts[key] = value end
  end
end
for _, key in ipairs{"log_mb", "hash_mb", "leaves"} do
  if not (opts[key] > 0) then error("argument " .. key .. " must be > 0, got " .. opts[key], 0) end
end
if opts.leaves ~= math.floor(opts.leaves) then
  error("argument leaves must be an integer, got " .. opts.leaves, 0)
end
if opts.dir == "" then opts.dir = nil end

pcall(ffi.cdef, [[
  typedef struct { long tv_sec; long tv_nsec; } vt_bench_timespec;
  int clock_gettime(int clock_id, vt_bench_timespec* ts);
]])
local ts = ffi.new("vt_bench_timespec")
local function now()
  ffi.C.clock_gettime(1, ts)  -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) + tonumber(ts.tv_nsec) * 1e-9
end

-- A fresh directory (inside opts.dir when given), removed at the end.
local root_dir = vt.fs.tmpdir("store-bench", opts.dir)
local function cleanup() vt.fs.remove(root_dir) end

local results = {}
local function report(fmt, ...) io.write(string.format(fmt, ...), "\n") io.flush() end

-- Pseudo-random bytes shaped like encoded log records: mostly small varint gaps and
-- direction bits, some full bytes (about 4 bits of entropy per byte).
local bit = require "bit"

-- xorshift32 (exact 32-bit integer arithmetic through the bit library).
local function xorshift(x)
  x = bit.bxor(x, bit.lshift(x, 13))
  x = bit.bxor(x, bit.rshift(x, 17))
  return bit.bxor(x, bit.lshift(x, 5))
end

local function log_like_bytes(n, seed)
  local buf = ffi.new("uint8_t[?]", n)
  local x = seed
  for i = 0, n - 1 do
    x = xorshift(x)
    if bit.band(x, 0x300) == 0 then
      buf[i] = bit.band(bit.rshift(x, 16), 255)
    else
      buf[i] = bit.band(bit.rshift(x, 24), 15)
    end
  end
  return ffi.string(buf, n)
end

-- 1. Log-record writes --------------------------------------------------------------------
-- `values` (optional): the record values to cycle through instead of log-like bytes.
local function bench_logs(label, compression, record_bytes, records_per_step, values)
  local step_bytes = record_bytes * records_per_step
  local steps = math.max(4, math.floor(opts.log_mb * 1048576 / step_bytes))
  -- A ring of distinct steps, built before timing (no repeated content inside a block).
  local ring_size = math.max(1, math.min(64, math.floor(64 * 1048576 / step_bytes)))
  local pool = values == nil and log_like_bytes(ring_size * step_bytes + record_bytes, 7 + record_bytes)
  local ring = {}
  for r = 1, ring_size do
    local recs = {}
    for j = 1, records_per_step do
      local off = ((r - 1) * records_per_step + (j - 1)) * record_bytes
      local value = pool and pool:sub(off + 1, off + record_bytes) or values[off / record_bytes % #values + 1]
      recs[j] = {boundary = string.format("block%d.attn:fwd", j), call = 0, value = value}
    end
    ring[r] = recs
  end
  local dir = root_dir .. "/logs-" .. label
  local store = vt.store.open(dir, {compression = compression})
  local run = store:create_run("bench", {spec = "bench", checkpoint_every = steps, steps = steps})
  run:put_checkpoint(0, {{name = "w", data = string.rep("\0", 16)}})
  local t0 = now()
  for s = 1, steps do run:write_step(s, ring[(s - 1) % ring_size + 1]) end
  store:flush()  -- compression happens when memtables are flushed: include it
  local elapsed = now() - t0
  local mb = steps * step_bytes / 1048576
  store:close()
  local disk = vt.fs.size(dir)
  vt.fs.remove(dir)
  local out = {
    mb_per_s = mb / elapsed,
    records_per_s = steps * records_per_step / elapsed,
    ratio = disk > 0 and steps * step_bytes / disk or 0,
  }
  report("log writes %-22s %7.1f MB/s %10.0f records/s  (%d steps x %d records x %d B, %s, stored %.2fx smaller)",
         label, out.mb_per_s, out.records_per_s, steps, records_per_step, record_bytes, store:compression(), out.ratio)
  return out
end

local large_zstd = bench_logs("64KiB-zstd", "zstd", 65536, 16)
local large_none = bench_logs("64KiB-none", "none", 65536, 16)
local small_zstd = bench_logs("2KiB-zstd", "zstd", 2048, 64)
local small_none = bench_logs("2KiB-none", "none", 2048, 64)
-- Records as the paper's window writes them: the dense encoding of Gaussian values rounded
-- with band 1/4 (about half logged, 1.6 bits per value), 64 distinct ones of about 64 KiB,
-- so that a repeat lies further back than zstd's window. The store writes such steps
-- uncompressed whatever its setting: the two rows should match, the zstd one no smaller.
local dense_values = {}
for i = 1, 64 do
  local _, record = vt.round(vt.tensor.randn(327680, {seed = i}), {band = 0.25})
  dense_values[i] = record:encode("dense")
end
local dense_zstd = bench_logs("64KiB-dense-zstd", "zstd", #dense_values[1], 16, dense_values)
local dense_none = bench_logs("64KiB-dense-none", "none", #dense_values[1], 16, dense_values)
results.log_dense_write_mb_per_s = dense_zstd.mb_per_s
results.log_dense_write_mb_per_s_uncompressed = dense_none.mb_per_s
results.log_dense_compression_ratio = dense_zstd.ratio
results.log_write_mb_per_s = large_zstd.mb_per_s
results.log_write_records_per_s = large_zstd.records_per_s
results.log_write_mb_per_s_uncompressed = large_none.mb_per_s
results.log_write_records_per_s_uncompressed = large_none.records_per_s
results.log_compression_ratio = large_zstd.ratio
results.log_small_write_mb_per_s = small_zstd.mb_per_s
results.log_small_write_records_per_s = small_zstd.records_per_s
results.log_small_write_mb_per_s_uncompressed = small_none.mb_per_s
results.log_small_write_records_per_s_uncompressed = small_none.records_per_s

-- 2. Checkpoint hashing -------------------------------------------------------------------
do
  local tensor_mb = 16
  local count = math.max(1, math.floor(opts.hash_mb / tensor_mb))
  local block = log_like_bytes(1048576, 99)
  local entries, datas = {}, {}
  for i = 1, count do
    -- Distinct content per tensor: a different 1 MiB block repeated.
    local data = string.rep(block:sub(i) .. block:sub(1, i - 1), tensor_mb)
    datas[i] = data
    entries[i] = {name = string.format("layer%02d.weight", i), dtype = "float32", shape = {tensor_mb * 262144}, data = data}
  end
  local bytes = count * tensor_mb * 1048576
  local best_raw, best_ckpt = math.huge, math.huge
  for _ = 1, 3 do
    local t0 = now()
    for i = 1, count do vt.store.sha256(datas[i]) end
    best_raw = math.min(best_raw, now() - t0)
    t0 = now()
    vt.store.checkpoint_digest(entries)
    best_ckpt = math.min(best_ckpt, now() - t0)
  end
  local raw_mb_s = bytes / 1048576 / best_raw
  local ckpt_mb_s = bytes / 1048576 / best_ckpt
  results.sha256_mb_per_s = raw_mb_s
  results.checkpoint_hash_mb_per_s = ckpt_mb_s
  results.hash_ratio_to_sha256 = ckpt_mb_s / raw_mb_s
  report("checkpoint hashing     %7.1f MB/s vs raw SHA-256 %7.1f MB/s: ratio %.3f (target >= 0.8; %d MiB in %d tensors)",
         ckpt_mb_s, raw_mb_s, results.hash_ratio_to_sha256, count * tensor_mb, count)

  -- Encoding (one copy) and storing a checkpoint (encode, parse, hash, write, flush).
  local t0 = now()
  local encoded = vt.store.checkpoint_encode(entries)
  local encode_s = now() - t0
  local store = vt.store.open(root_dir .. "/checkpoints")
  local run = store:create_run("bench", {spec = "bench", checkpoint_every = 1, steps = 0})
  t0 = now()
  run:put_checkpoint(0, encoded)
  store:flush()
  local put_s = now() - t0
  t0 = now()
  local back = run:checkpoint(0)
  local get_s = now() - t0
  assert(back == encoded, "checkpoint read back differs")
  store:close()
  vt.fs.remove(root_dir .. "/checkpoints")
  results.checkpoint_encode_mb_per_s = #encoded / 1048576 / encode_s
  results.checkpoint_put_mb_per_s = #encoded / 1048576 / put_s
  results.checkpoint_get_mb_per_s = #encoded / 1048576 / get_s
  report("checkpoint encode      %7.1f MB/s, put (+flush) %7.1f MB/s, get (checked) %7.1f MB/s",
         results.checkpoint_encode_mb_per_s, results.checkpoint_put_mb_per_s, results.checkpoint_get_mb_per_s)
end

-- 3. Merkle trees of 1M leaves --------------------------------------------------------------
local n = math.floor(opts.leaves)
local proofs = 1000
-- Deterministic proof positions.
local picks = {}
do
  local x = 12345
  for i = 1, proofs do
    x = xorshift(x)
    picks[i] = (x % n + n) % n
  end
end

do
  local tree = vt.merkle.tree()
  local leaves = {}
  for i = 0, n - 1 do leaves[i] = string.format("%064x", i) end
  local t0 = now()
  for i = 0, n - 1 do tree:append(leaves[i]) end
  local append_s = now() - t0
  local root = tree:root()
  t0 = now()
  local ps = {}
  for i = 1, proofs do ps[i] = tree:prove(picks[i]) end
  local prove_s = now() - t0
  t0 = now()
  for i = 1, proofs do assert(vt.merkle.verify(leaves[picks[i]], picks[i], n, ps[i], root)) end
  local verify_s = now() - t0
  t0 = now()
  for i = 1, proofs do tree:consistency(math.max(1, picks[i]), n) end
  local cons_s = now() - t0
  results.merkle_memory_append_us = append_s / n * 1e6
  results.merkle_memory_append_total_s = append_s
  results.merkle_memory_prove_us = prove_s / proofs * 1e6
  results.merkle_verify_us = verify_s / proofs * 1e6
  results.merkle_memory_consistency_us = cons_s / proofs * 1e6
  report("merkle in memory       %d leaves appended in %.2f s (%.2f us/leaf); proof %.1f us, verify %.1f us, consistency %.1f us",
         n, append_s, results.merkle_memory_append_us, results.merkle_memory_prove_us, results.merkle_verify_us,
         results.merkle_memory_consistency_us)
  tree, leaves, ps = nil, nil, nil
  collectgarbage()
end

do
  -- A run with a checkpoint after every step: n leaves, n - 1 steps.
  local store = vt.store.open(root_dir .. "/merkle")
  local run = store:create_run("bench", {spec = "bench", checkpoint_every = 1, steps = n - 1})
  local ckpt = vt.store.checkpoint_encode{{name = "w", data = string.rep("\0", 16)}}
  local no_records = {}
  local put_s, step_s = 0, 0
  local t_all = now()
  for i = 0, n - 1 do
    if i > 0 then
      local t = now()
      run:write_step(i, no_records)
      step_s = step_s + now() - t
    end
    local t = now()
    run:put_checkpoint(i, ckpt)
    put_s = put_s + now() - t
  end
  store:flush()
  local total_s = now() - t_all
  local root = run:root()
  local t0 = now()
  local ps = {}
  for i = 1, proofs do ps[i] = run:prove(picks[i]) end
  local prove_s = now() - t0
  t0 = now()
  for i = 1, proofs do assert(vt.merkle.verify(run:leaf(picks[i]), picks[i], n, ps[i], root)) end
  local leaf_verify_s = now() - t0
  t0 = now()
  for i = 1, proofs do run:root(math.max(1, picks[i])) end
  local root_at_s = now() - t0
  t0 = now()
  for i = 1, proofs do run:consistency(math.max(1, picks[i]), n) end
  local cons_s = now() - t0
  -- A reader opening the store cold.
  store:close()
  local reader = vt.store.open(root_dir .. "/merkle", {read_only = true})
  local rrun = reader:run("bench")
  t0 = now()
  for i = 1, proofs do rrun:prove(picks[i]) end
  local cold_prove_s = now() - t0
  assert(rrun:root() == root)
  reader:close()
  vt.fs.remove(root_dir .. "/merkle")
  results.merkle_store_leaves = n
  results.merkle_store_append_us = put_s / n * 1e6
  results.merkle_store_step_us = step_s / math.max(1, n - 1) * 1e6
  results.merkle_store_total_s = total_s
  results.merkle_store_prove_us = prove_s / proofs * 1e6
  results.merkle_store_leaf_and_verify_us = leaf_verify_s / proofs * 1e6
  results.merkle_store_root_at_us = root_at_s / proofs * 1e6
  results.merkle_store_consistency_us = cons_s / proofs * 1e6
  results.merkle_store_reader_prove_us = cold_prove_s / proofs * 1e6
  report("merkle in the store    %d leaves: put_checkpoint (leaf + nodes + checkpoint) %.1f us/leaf, empty step %.1f us, total %.1f s",
         n, results.merkle_store_append_us, results.merkle_store_step_us, total_s)
  report("                       proof %.1f us (reader process view %.1f us), root at size %.1f us, consistency %.1f us",
         results.merkle_store_prove_us, results.merkle_store_reader_prove_us, results.merkle_store_root_at_us,
         results.merkle_store_consistency_us)
end

cleanup()

-- The last line: one JSON object.
local keys = {}
for k in pairs(results) do keys[#keys + 1] = k end
table.sort(keys)
local parts = {}
for _, k in ipairs(keys) do
  local v = results[k]
  local text
  if v ~= v or v == math.huge or v == -math.huge then
    text = "null"
  elseif v == math.floor(v) and math.abs(v) < 1e15 then
    text = string.format("%d", v)
  else
    text = string.format("%.6g", v)
  end
  parts[#parts + 1] = string.format("%q: %s", k, text)
end
io.write("{", table.concat(parts, ", "), "}\n")
