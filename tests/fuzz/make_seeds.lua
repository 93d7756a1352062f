-- Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/<target>/): a few small,
-- valid inputs each, made by vtrun's own encoders, so the fuzzers start from inputs that get
-- past the first checks. The files are in the repository; run this again only to remake them.
--
--   build/vtrun tests/fuzz/make_seeds.lua [tests/fuzz/corpus]
local root = arg[1] or "tests/fuzz/corpus"
local ffi = require "ffi"

local function write(target, name, bytes)
  os.execute("mkdir -p '" .. root .. "/" .. target .. "'")
  local f = assert(io.open(root .. "/" .. target .. "/" .. name, "wb"))
  f:write(bytes)
  f:close()
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("*a")
  f:close()
  return bytes
end

local function f32(...)
  local n = select("#", ...)
  return ffi.string(ffi.new("float[?]", n, ...), 4 * n)
end

-- Log records: dense, sparse, with EXACT values, empty.
local x = vt.tensor.randn({40}, {seed = 1}):double() * 3
local _, record = vt.round(x, {bits = 26, band = 0.25})
write("log_decode", "dense", record:encode("dense"))
write("log_decode", "sparse", record:encode("sparse"))
local _, narrow = vt.round(vt.tensor.randn({300}, {seed = 2}):double(), {bits = 32, band = 0.02})
write("log_decode", "sparse_few", narrow:encode("sparse"))
local _, empty = vt.round(vt.tensor.zeros({0}):double())
write("log_decode", "empty", empty:encode("dense"))

-- Checkpoints: the fuzz target's own model state (decodes into it), and other dtypes.
write("checkpoint", "model_state", vt.store.checkpoint_encode{
  {name = "layer.weight", dtype = "float32", shape = {2, 3}, data = f32(1, 2, 3, 4, 5, 6)},
  {name = "scale", dtype = "float32", shape = {}, data = f32(0.5)}})
write("checkpoint", "mixed", vt.store.checkpoint_encode{
  {name = "a", dtype = "float64", shape = {2}, data = string.rep("\0", 16)},
  {name = "b", dtype = "int64", shape = {1, 1}, data = string.rep("\1", 8)},
  {name = "c", dtype = "uint8", shape = {3}, data = "\0\1\0"},
  {name = "d", dtype = "int32", shape = {0, 4}, data = ""}})
write("checkpoint", "no_entries", vt.store.checkpoint_encode{})

-- safetensors and .npy files, made in a scratch directory.
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")
vt.safetensors.save(tmp .. "/a.safetensors", {weight = vt.tensor{{1, 2}, {3, 4}}:float(), bias = vt.tensor{0.5}:double(),
                                              steps = vt.tensor{7}:long(), mask = vt.tensor({true, false})},
                    {format = "pt", note = "seed"})
write("safetensors", "four_tensors", read(tmp .. "/a.safetensors"))
vt.safetensors.save(tmp .. "/b.safetensors", {e = vt.tensor.zeros({0, 3})})
write("safetensors", "empty_tensor", read(tmp .. "/b.safetensors"))
local i = 0
for _, t in ipairs{vt.tensor{{1.5, -2}, {3, 4}}:double(), vt.tensor{1, 2, 3}:float(), vt.tensor{-1, 2}:long(),
                   vt.tensor({true, false, true}), vt.tensor.zeros({2, 0, 3}):to("int32"), vt.tensor(5):to("float16")} do
  i = i + 1
  t:save(tmp .. "/" .. i .. ".npy")
  write("npy", t:dtype() .. "_" .. i, read(tmp .. "/" .. i .. ".npy"))
end
os.execute("rm -rf '" .. tmp .. "'")

-- Specs: one per model type, small enough for the fuzz target's model bound.
local data = vt.data.synthetic{size = 16, input_shape = {1, 4, 4}, classes = 3}
local function spec(model, optim, round)
  return vt.spec{model = model, data = data, optim = optim, steps = 4, batch = 2, seed = 5, checkpoint_every = 2,
                 round = round}:canonical()
end
write("spec", "mlp", spec(vt.models.mlp{input_shape = {1, 4, 4}, hidden = {8}, classes = 3}, vt.optim.sgd{lr = 0.05, momentum = 0.9}))
write("spec", "resnet", spec(vt.models.resnet{depth = 18, width = 2, in_channels = 1, classes = 3},
                             vt.optim.adamw{lr = 3e-4, weight_decay = 0.01},
                             {bits = 26, band = 0.1, boundaries = {["fc:fwd"] = {band = 0, alpha = 2 ^ -40}}}))
write("spec", "gpt2", vt.spec{model = vt.models.gpt2{layers = 1, d_model = 8, heads = 2, vocab = 16, context = 4},
                              data = vt.data.text{path = vt.corpus, context = 4}, steps = 2}:canonical())

-- JSON: messages of the game as they cross between parties.
local hex = string.rep("ab", 32)
local messages = {
  request = {kind = "request", game = "g", seq = 1, from = "client", to = "trainer", type = "commit", body = {}},
  commit = {kind = "reply", game = "g", seq = 1, from = "trainer", to = "client", type = "commit",
            body = {spec = "batch=2\n", spec_hash = hex, n_leaves = 3, root = hex, checkpoint_every = 2, steps = 4}},
  logs = {kind = "reply", seq = 2, type = "logs", body = {leaf = {index = 1, leaf = hex, state_digest = hex, log_digest = hex,
          proof = {hex, hex}}, steps = {{step = 1, records = {{boundary = "fc0:fwd", call = 0, value = "\0\1\255VTLG"}}}}}},
  forfeit = {kind = "reply", forfeit = {party = "auditor", reason = "missed the deadline (2.50 s > 1 s)"}},
  values = {a = {1, -2.5, 1e300, 5e-324, 9007199254740993, vt.json.null, true, false}, ["\226\130\172"] = "\u{1F600}\n\"\\"},
}
for name, m in pairs(messages) do write("json", name, vt.json.encode(m)) end

-- Merkle: u64 index, u64 size, u64 m, u8 leaf count, then 32-byte hashes (root first).
local function u64(v) return ffi.string(ffi.new("uint64_t[1]", v), 8) end
local function bin(h) return (h:gsub("..", function(b) return string.char(tonumber(b, 16)) end)) end
local leaves = {}
for k = 1, 5 do leaves[k] = vt.merkle.leaf_hash(string.format("%02x", k)) end
local function mth(lo, hi)  -- RFC 6962 over leaves[lo+1 .. hi]
  if hi - lo == 1 then return leaves[lo + 1] end
  local k = 1
  while k * 2 < hi - lo do k = k * 2 end
  return vt.merkle.node_hash(mth(lo, lo + k), mth(lo + k, hi))
end
-- Leaf 2 of 5: siblings leaf 3, node(0..2), node(4..5).
local proof = {leaves[4], mth(0, 2), mth(4, 5)}
write("merkle", "inclusion", u64(2) .. u64(5) .. u64(3) .. "\4" .. bin(mth(0, 5)) .. bin(proof[1]) .. bin(proof[2]) ..
      bin(proof[3]) .. bin(leaves[3]))
write("merkle", "single", u64(0) .. u64(1) .. u64(1) .. "\0" .. bin(leaves[1]) .. bin(leaves[1]))
print("seeds written under " .. root)
