-- vt.store and vt.merkle from Lua: the known-answer run of store/FORMAT.md, reading back,
-- proofs, checkpoint encoding, transcripts, and the errors a script can hit.
local T = require "vt.test"
local ffi = require "ffi"
local s = T.suite("store")

-- Every store of this file lives under one temporary directory, removed at the end.
local tmp_root = os.tmpname()
os.remove(tmp_root)
tmp_root = tmp_root .. "-stores"
local dirs = 0
local function fresh_dir()
  dirs = dirs + 1
  return tmp_root .. "/" .. dirs
end

local function f32(...)
  local n = select("#", ...)
  return ffi.string(ffi.new("float[?]", n, ...), 4 * n)
end

local function i64(v)
  return ffi.string(ffi.new("int64_t[1]", v), 8)
end

-- FORMAT.md, "A whole run": spec "kat-spec", k = 2, n = 3.
local KAT_LEAVES = {
  [0] = "6266d675f7f372aa9fcc9832b85a9a071b5645f99dade0ebeedbc72031973d0b",
  "2fea267fb78516e5524368a3ba9355fabf201a3da9c09559cc8ca4f60158e432",
  "c94d63d634a6a1dfb36d227755088dfad8f7d4e21df9625e54e2409c6bfc457e",
}
local KAT_ROOT = "40fc86452e20d10fb7cc8a11a7a569a345931683e08d2a675fba6b3fd20326fc"

local function kat_checkpoint(i)
  return {{name = "w", dtype = "float32", shape = {2}, data = f32(i, i + 0.5)}}
end

local function kat_records(step)
  local r = {{boundary = "a:fwd", call = 0, value = string.rep(string.char(step), step)},
             {boundary = "b:bwd", value = "v" .. step}}
  if step == 2 then r[#r + 1] = {boundary = "a:fwd", call = 1, value = ""} end
  return r
end

local function write_kat(store, id)
  local run = store:create_run(id, {spec = "kat-spec", checkpoint_every = 2, steps = 3})
  run:put_checkpoint(0, kat_checkpoint(0))
  run:write_step(1, kat_records(1))
  run:write_step(2, kat_records(2))
  run:put_checkpoint(1, kat_checkpoint(1))
  run:write_step(3, kat_records(3))
  run:put_checkpoint(2, kat_checkpoint(2))
  return run
end

s:test("the known-answer run gives the documented leaves and root", function()
  local store = vt.store.open(fresh_dir())
  local run = write_kat(store, "kat")
  T.assert_eq(run:root(), KAT_ROOT)
  for i = 0, 2 do T.assert_eq(run:leaf(i), KAT_LEAVES[i]) end
  T.assert_eq(run:leaf(3), nil)
  T.assert_eq(run:size(), 3)
  local info = run:info()
  T.assert_eq(info.complete, true)
  T.assert_eq(info.steps_written, 3)
  T.assert_eq(info.total_leaves, 3)
  T.assert_eq(info.spec_hash, vt.store.sha256("kat-spec"))
  T.assert_eq(run:spec(), "kat-spec")
  T.assert_eq(run:spec_hash(), info.spec_hash)
  local li = run:leaf_info(1)
  T.assert_eq(li.step, 2)
  T.assert_eq(li.leaf, KAT_LEAVES[1])
  T.assert_eq(li.log_digest, run:log_digest(1))
  T.assert_eq(vt.store.leaf(info.spec_hash, 1, li.state_digest, li.log_digest), li.leaf)
  T.assert_eq(run:checkpoint(1), vt.store.checkpoint_encode(kat_checkpoint(1)))
  T.assert_eq(run:checkpoint(5), nil)
  T.assert_eq(store:runs(), {"kat"})
  T.assert_eq(store:run("nope"), nil)
  T.assert_true(store:verify().ok)
  T.assert_true(tostring(run):find("vt.Run('kat', step 3/3, leaves 3/3", 1, true) ~= nil, tostring(run))
  store:close()
end)

s:test("log records iterate by step and boundary", function()
  local store = vt.store.open(fresh_dir())
  local run = write_kat(store, "kat")
  local seen = {}
  for step, boundary, call, value in run:records() do
    seen[#seen + 1] = string.format("%d/%s/%d/%d", step, boundary, call, #value)
  end
  T.assert_eq(seen, {"1/a:fwd/0/1", "1/b:bwd/0/2", "2/a:fwd/0/2", "2/a:fwd/1/0", "2/b:bwd/0/2",
                     "3/a:fwd/0/3", "3/b:bwd/0/2"})
  seen = {}
  for step, boundary, call, value in run:records{boundary = "b:bwd", first_step = 2} do
    seen[#seen + 1] = step .. "=" .. value
  end
  T.assert_eq(seen, {"2=v2", "3=v3"})
  seen = {}
  for step in run:records{first_step = 2, last_step = 2} do seen[#seen + 1] = step end
  T.assert_eq(seen, {2, 2, 2})
  local step2 = run:step(2)
  T.assert_eq(#step2, 3)
  T.assert_eq(step2[2], {boundary = "a:fwd", call = 1, value = ""})
  T.assert_eq(run:step(9), nil)
  T.assert_eq(run:record(3, "b:bwd"), "v3")
  T.assert_eq(run:record(3, "b:bwd", 1), nil)
  local si = run:step_info(2)
  T.assert_eq(si.records, 3)
  T.assert_eq(si.bytes, 4)
  T.assert_eq(si.digest, vt.store.step_digest(2, kat_records(2)))
  T.assert_eq(run:log_digest(1), vt.store.log_digest{vt.store.step_digest(1, kat_records(1)), si.digest})
  T.assert_error(function() run:records{boundary = ""} end, "invalid boundary name")
  T.assert_error(function() run:records{frist_step = 1} end, "unknown option 'frist_step'")
  store:close()
end)

s:test("inclusion and consistency proofs verify", function()
  local store = vt.store.open(fresh_dir())
  local run = write_kat(store, "kat")
  local root = run:root()
  for n = 1, 3 do
    local root_n = run:root(n)
    for i = 0, n - 1 do
      local proof = run:prove(i, n)
      T.assert_true(vt.merkle.verify(run:leaf(i), i, n, proof, root_n))
      T.assert_false(vt.merkle.verify(run:leaf(i), i + 1, n, proof, root_n))
    end
    for m = 0, n do
      T.assert_true(vt.merkle.verify_consistency(run:root(m), m, n, run:consistency(m, n), root_n))
    end
  end
  local proof = run:prove(1)
  T.assert_eq(#proof, 2)
  T.assert_true(vt.merkle.verify(run:leaf(1), 1, 3, proof, root))
  local bad = {proof[1], proof[1]}
  T.assert_false(vt.merkle.verify(run:leaf(1), 1, 3, bad, root))
  T.assert_false(vt.merkle.verify(run:leaf(1), 1, 3, proof, run:root(2)))
  T.assert_true(vt.merkle.verify_consistency(run:root(2), 2, 3, run:consistency(2), root))
  T.assert_eq(run:root(0), vt.merkle.empty_root())
  T.assert_error(function() run:prove(3) end, "out of range")
  T.assert_error(function() run:root(4) end, "beyond its 3 stored leaves")
  T.assert_error(function() vt.merkle.verify("zz", 0, 1, {}, root) end, "leaf must be hex")
  T.assert_error(function() vt.merkle.verify(run:leaf(0), 0, 1, {"abc"}, root) end, "proof element 1")
  T.assert_error(function() vt.merkle.verify(run:leaf(0), -1, 1, {}, root) end, "leaf index must be an integer")
  T.assert_error(function() vt.merkle.verify(run:leaf(0), 0, 1, {}, "00") end, "root must be 64 hex")
  store:close()
end)

s:test("in-memory trees reproduce the Certificate Transparency roots", function()
  -- google/certificate-transparency cpp/merkletree/merkle_tree_test.cc, kInputs/kSHA256Roots
  local leaves = {"", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                  "606162636465666768696a6b6c6d6e6f"}
  local roots = {
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
  }
  local tree = vt.merkle.tree()
  T.assert_eq(tree:root(), vt.merkle.empty_root())
  T.assert_eq(vt.merkle.empty_root(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  for i, leaf in ipairs(leaves) do
    T.assert_eq(tree:append(leaf), i - 1)
    T.assert_eq(tree:root(), roots[i])
  end
  T.assert_eq(tree:size(), 8)
  T.assert_eq(tree:root(5), roots[5])
  T.assert_eq(vt.merkle.root(leaves), roots[8])
  T.assert_eq(tree:prove(0), {"96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
                              "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                              "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"})
  T.assert_eq(tree:consistency(2, 5), {"5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
                                       "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"})
  T.assert_true(vt.merkle.verify(leaves[6], 5, 8, tree:prove(5), roots[8]))
  T.assert_true(vt.merkle.verify_consistency(roots[6], 6, 8, tree:consistency(6), roots[8]))
  T.assert_false(vt.merkle.verify_consistency(roots[5], 6, 8, tree:consistency(6), roots[8]))
  T.assert_eq(vt.merkle.leaf_hash(""), roots[1])
  T.assert_eq(vt.merkle.node_hash(vt.merkle.leaf_hash(""), vt.merkle.leaf_hash("00")), roots[2])
  T.assert_error(function() tree:root(9) end, "beyond the tree's 8 leaves")
  T.assert_true(tostring(tree):find("vt.MerkleTree(8 leaves", 1, true) ~= nil)
end)

s:test("checkpoint encoding known answer, decode and digest", function()
  local entries = {
    {name = "fc.weight", dtype = "float32", shape = {2, 2}, data = f32(1.0, -2.0, 0.5, 3.25)},
    {name = "fc.bias", data = f32(0.25, -0.0)},
    {name = "step", dtype = "int64", shape = {}, data = i64(7)},
  }
  local bytes = vt.store.checkpoint_encode(entries)
  T.assert_eq(#bytes, 128)
  local digest = "d9462ebc57c0d2e8a9f40bdf31b80d23184fc9c17172050ffec6ff9bd9d1ad16"
  T.assert_eq(vt.store.sha256(bytes), digest)
  T.assert_eq(vt.store.checkpoint_digest(entries), digest)
  T.assert_eq(vt.store.checkpoint_digest(bytes), digest)
  local decoded = vt.store.checkpoint_decode(bytes)
  T.assert_eq(#decoded, 3)
  T.assert_eq(decoded[1].name, "fc.bias")
  T.assert_eq(decoded[1].shape, {2})
  T.assert_eq(decoded[2].shape, {2, 2})
  T.assert_eq(decoded[3].dtype, "int64")
  T.assert_eq(decoded[3].shape, {})
  T.assert_eq(vt.store.checkpoint_encode(decoded), bytes)
  -- Tensors hash the same as their bytes.
  local t = vt.tensor{{1, -2}, {0.5, 3.25}}:float()
  local from_tensor = {{name = "fc.weight", tensor = t}, entries[2], entries[3]}
  T.assert_eq(vt.store.checkpoint_digest(from_tensor), digest)
  T.assert_eq(vt.store.checkpoint_encode(from_tensor), bytes)
  T.assert_error(function() vt.store.checkpoint_decode(bytes .. "x") end, "1 trailing bytes")
  T.assert_error(function() vt.store.checkpoint_decode("nope") end, "malformed checkpoint")
  T.assert_error(function() vt.store.checkpoint_encode{{name = "w", data = "abc"}} end,
                 "not a whole number of float32 elements")
  T.assert_error(function() vt.store.checkpoint_encode{{name = "w", dtype = "bf16", data = "ab"}} end,
                 "unknown dtype 'bf16'")
  T.assert_error(function() vt.store.checkpoint_encode{{name = "w", shape = {3}, data = f32(1)}} end,
                 "needs 12 bytes, got 4")
  T.assert_error(function() vt.store.checkpoint_encode{{name = "w", data = f32(1), tensor = t}} end,
                 "exactly one of data and tensor")
  T.assert_error(function() vt.store.checkpoint_encode{{name = "w", data = f32(1)}, {name = "w", data = f32(2)}} end,
                 "appears twice")
  T.assert_error(function() vt.store.checkpoint_encode{{nmae = "w"}} end, "unknown option 'nmae'")
end)

s:test("writing follows the leaf schedule, errors name the problem", function()
  local store = vt.store.open(fresh_dir())
  T.assert_error(function() store:create_run("bad id", {spec = "s", checkpoint_every = 1, steps = 1}) end,
                 "invalid run id 'bad id'")
  T.assert_error(function() store:create_run("r", {spec = "s", steps = 1}) end, "checkpoint_every")
  T.assert_error(function() store:create_run("r", {spec = "s", checkpoint_every = 1, steps = 1, k = 2}) end,
                 "unknown option 'k'")
  local run = store:create_run("r", {spec = "s", checkpoint_every = 2, steps = 2, metadata = "m"})
  T.assert_eq(run:metadata(), "m")
  T.assert_eq(run:set_metadata("m2"), run)
  T.assert_eq(run:metadata(), "m2")
  T.assert_error(function() store:create_run("r", {spec = "s", checkpoint_every = 1, steps = 1}) end,
                 "run 'r' already exists")
  T.assert_error(function() run:write_step(1, {}) end, "store leaf 0")
  T.assert_error(function() run:put_checkpoint(0, "garbage") end, "malformed checkpoint")
  T.assert_error(function() run:put_checkpoint(0, kat_checkpoint(0), {state_digest = string.rep("0", 64)}) end,
                 "differs from the expected")
  local leaf0 = run:put_checkpoint(0, kat_checkpoint(0),
                                   {state_digest = vt.store.checkpoint_digest(kat_checkpoint(0)), metadata = "m3"})
  T.assert_eq(leaf0, run:leaf(0))
  T.assert_eq(run:metadata(), "m3")
  T.assert_error(function() run:write_step(2, {}) end, "expected step 1 next, got step 2")
  T.assert_error(function() run:write_step(1, {{boundary = "a", value = 5}}) end, "value must be a string")
  T.assert_error(function() run:write_step(1, {{boundary = "a", value = "x", extra = 1}}) end, "unknown option 'extra'")
  T.assert_error(function() run:write_step(1, {{boundary = "a", value = "x"}, {boundary = "a", value = "y"}}) end,
                 "appears twice")
  T.assert_error(function() run:write_step(1.5, {}) end, "step must be an integer")
  run:write_step(1, {{boundary = "a", value = "x"}})
  -- The writer died here: roll back to leaf 0 and redo step 1 differently.
  local leaf, step = run:rollback()
  T.assert_eq(leaf, 0)
  T.assert_eq(step, 0)
  T.assert_eq(run:step(1), nil)
  run:write_step(1, {})
  run:write_step(2, {{boundary = "b", call = 3, value = "y"}})
  T.assert_error(function() run:write_step(3, {}) end, "store leaf 1 (the checkpoint after step 2) before step 3", true)
  T.assert_error(function() run:put_checkpoint(2, kat_checkpoint(1)) end, "expected leaf 1 next, got leaf 2")
  run:put_checkpoint(1, kat_checkpoint(1))
  T.assert_error(function() run:write_step(3, {}) end, "run 'r' is complete")
  T.assert_error(function() run:put_checkpoint(2, kat_checkpoint(2)) end, "run 'r' is complete")
  T.assert_true(run:info().complete)
  T.assert_true(store:verify().ok)
  store:close()
end)

s:test("transcripts", function()
  local dir = fresh_dir()
  local store = vt.store.open(dir)
  T.assert_eq(store:games(), {})
  T.assert_eq(store:append_transcript("g1", "challenge"), 0)
  T.assert_eq(store:append_transcript("g1", "answer\0bytes"), 1)
  T.assert_eq(store:append_transcript("g0", ""), 0)
  T.assert_error(function() store:append_transcript("bad game", "x") end, "invalid game id")
  store:close()
  store = vt.store.open(dir)
  T.assert_eq(store:games(), {"g0", "g1"})
  T.assert_eq(store:transcript("g1"), {"challenge", "answer\0bytes"})
  T.assert_eq(store:transcript_entry("g1", 1), "answer\0bytes")
  T.assert_eq(store:transcript_entry("g1", 2), nil)
  T.assert_eq(store:transcript("none"), {})
  store:close()
end)

s:test("closed stores, readers, and open errors", function()
  local dir = fresh_dir()
  local store = vt.store.open(dir, {compression = "none"})
  T.assert_eq(store:compression(), "none")
  local run = write_kat(store, "kat")
  T.assert_error(function() vt.store.open(dir) end, "is already open for writing")
  local reader = vt.store.open(dir, {read_only = true})
  T.assert_true(reader:read_only())
  T.assert_eq(reader:run("kat"):root(), KAT_ROOT)
  T.assert_error(function() reader:create_run("x", {spec = "", checkpoint_every = 1, steps = 0}) end, "read-only", true)
  T.assert_error(function() reader:run("kat"):write_step(4, {}) end, "read-only", true)
  store:append_transcript("g", "late")
  T.assert_eq(reader:transcript("g"), {})
  T.assert_eq(reader:refresh(), reader)
  T.assert_eq(reader:transcript("g"), {"late"})
  reader:close()
  store:close()
  store:close()  -- idempotent
  T.assert_true(store:is_closed())
  T.assert_true(tostring(store):find("closed", 1, true) ~= nil)
  T.assert_error(function() store:runs() end, "store:runs: store '.*' is closed")
  T.assert_error(function() run:root() end, "is closed")
  T.assert_error(function() run:records() end, "is closed")
  T.assert_error(function() store:verify() end, "is closed")
  -- An iterator whose store is closed mid-way raises, never crashes.
  store = vt.store.open(dir)
  local iter = store:run("kat"):records()
  T.assert_eq(iter(), 1)
  store:close()
  T.assert_eq(iter(), 1)  -- the rest of the buffered step
  T.assert_error(function() iter() end, "is closed")
  T.assert_error(function() vt.store.open(fresh_dir(), {read_only = true}) end, "does not exist")
  T.assert_error(function() vt.store.open(dir, {readonly = true}) end, "unknown option 'readonly'")
  T.assert_error(function() vt.store.open(dir, {compression = "gzip"}) end, "must be \"zstd\", \"lz4\" or \"none\"")
  T.assert_error(function() vt.store.open(dir, {read_only = 1}) end, "must be a boolean")
  T.assert_error(function() vt.store.open() end, "string expected")
  T.assert_error(function() store.runs(42) end, "vt.Store expected")
end)

s:test("steps without the write-ahead log: same run, seen by readers once flushed", function()
  local dir = fresh_dir()
  local store = vt.store.open(dir, {unlogged_step_bytes = 0})
  local run = store:create_run("kat", {spec = "kat-spec", checkpoint_every = 2, steps = 3})
  run:put_checkpoint(0, kat_checkpoint(0))
  local reader = vt.store.open(dir, {read_only = true})
  run:write_step(1, kat_records(1))
  run:write_step(2, kat_records(2))
  -- In the memtables only: the reader follows the write-ahead log and the SST files.
  T.assert_eq(reader:refresh():run("kat"):info().steps_written, 0)
  run:put_checkpoint(1, kat_checkpoint(1))  -- flushes the steps before it
  local info = reader:refresh():run("kat"):info()
  T.assert_eq(info.steps_written, 2)
  T.assert_eq(info.leaves, 2)
  run:write_step(3, kat_records(3))
  run:put_checkpoint(2, kat_checkpoint(2))
  T.assert_eq(run:root(), KAT_ROOT)
  reader:close()
  store:close()
  T.assert_eq(vt.store.open(dir, {read_only = true}):run("kat"):root(), KAT_ROOT)
  -- A step under the threshold after an unlogged one goes without the log too (through it,
  -- it would flush the store first, and the reader would see both steps).
  local dir2 = fresh_dir()
  store = vt.store.open(dir2, {unlogged_step_bytes = 4})
  run = store:create_run("kat", {spec = "kat-spec", checkpoint_every = 2, steps = 3})
  run:put_checkpoint(0, kat_checkpoint(0))
  reader = vt.store.open(dir2, {read_only = true})
  run:write_step(1, {{boundary = "a:fwd", value = "12345678"}})  -- 8 bytes: unlogged
  run:write_step(2, {{boundary = "a:fwd", value = "1"}})
  T.assert_eq(reader:refresh():run("kat"):info().steps_written, 0)
  run:put_checkpoint(1, kat_checkpoint(1))
  T.assert_eq(reader:refresh():run("kat"):info().steps_written, 2)
  reader:close()
  store:close()
  T.assert_error(function() vt.store.open(dir, {unlogged_step_bytes = -1}) end,
                 "option 'unlogged_step_bytes' must be >= 0")
  T.assert_error(function() vt.store.open(dir, {unlogged_step_bytes = 1.5}) end, "unlogged_step_bytes")
end)

s:test("a reader without a temporary directory says to set TMPDIR", function()
  local dir = fresh_dir()
  vt.store.open(dir):close()
  local script = "vt.store.open('" .. dir .. "', {read_only = true})"
  local p = vt.process.spawn({"sh", "-c", 'exec "$0" "$@" 2>&1', vt.executable(), "-e", script},
                             {env = {"TMPDIR=" .. dir .. "/no-such-directory"}})
  local out = {}
  for line in function() return p:receive(60) end do out[#out + 1] = line end
  T.assert_eq(p:wait(60), 1)
  local text = table.concat(out, "\n")
  T.assert_true(text:find("a store reader needs a temporary directory, and there is none (TMPDIR=" .. dir ..
                          "/no-such-directory", 1, true), text)
  T.assert_true(text:find("set TMPDIR to a writable directory", 1, true), text)
end)

local passed, failed = T.run{exit = false}
os.execute("rm -rf '" .. tmp_root .. "'")
os.exit(failed == 0 and 0 or 1)
