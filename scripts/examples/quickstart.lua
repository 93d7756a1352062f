-- vtrun quickstart: train a small model on one device profile, audit it on another, and
-- show that the two roots are equal bit for bit. (The verification game with a judge
-- comes next; see the issues.)
--
--   build/vtrun scripts/examples/quickstart.lua [workdir]
local workdir = arg[1] or os.tmpname() .. ".quickstart"
os.execute("rm -rf '" .. workdir .. "' && mkdir -p '" .. workdir .. "'")

local v = vt.version()
print(string.format("vtrun %s (LibTorch %s, RocksDB %s), %d threads", v.vtrun, v.libtorch, v.rocksdb, vt.threads()))

-- Why this is needed: two device profiles multiply the same FP64 matrices in another order,
-- and most results differ in the last bits.
local m1 = vt.tensor.randn({256, 512}, {seed = 1})
local m2 = vt.tensor.randn({512, 256}, {seed = 2})
local p1 = vt.ops.matmul(m1, m2)
vt.set_profile("splitk4")
local p2 = vt.ops.matmul(m1, m2)
vt.set_profile("native")
print(string.format("one FP64 matmul on profiles 'native' and 'splitk4': %.1f%% of the results differ bitwise",
                    100 * p1:ne(p2):double():mean()))

local data = vt.data.fashion_mnist{limit = 4096}
local spec = vt.spec{
  model = vt.models.mlp{input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10},
  data = data,
  optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
  batch = 64, steps = 60, seed = 1, checkpoint_every = 10,
  round = {bits = 32, band = 0.25},  -- the paper's window
}
print(spec)

local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(workdir .. "/trainer"), profile = "native"}
local t = trainer:run()
print(string.format("trainer on 'native':  %d steps in %.1f s, final loss %.4f, %.1f%% of %d rounded values logged, %d log bytes",
                    t.steps_run, t.seconds, t.loss, 100 * t.logged / t.elements, t.elements, t.log_bytes))

local auditor = vt.auditor{spec = spec, data = data, logs = trainer, profile = "splitk4",
                           store = vt.store.open(workdir .. "/auditor")}
local r = auditor:run()
print(string.format("auditor on 'splitk4': %d corrections copied from the log, %d illegitimate entries, %d near misses",
                    r.corrections, r.illegitimate, r.near_misses))
print("trainer root: " .. t.root)
print("auditor root: " .. r.root)
print(t.root == r.root and "roots equal: the training is replicated bit for bit" or "ROOTS DIFFER")
os.exit(t.root == r.root and 0 or 1)
