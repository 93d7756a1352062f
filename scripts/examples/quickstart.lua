-- vtrun quickstart: what exists so far. Later issues grow this into a short train, audit
-- and verification game.
print("vtrun " .. vt.version().vtrun .. " on LibTorch " .. vt.version().libtorch ..
      ", " .. vt.threads() .. " threads")

local a = vt.tensor{{1, 2}, {3, 4}}
print(a)
print("sum", a:sum(), "mean", a:mean())

-- Counter-based random tensors are a pure function of the seed: identical everywhere.
local x = vt.tensor.randn({4, 3}, {seed = 7})
local y = vt.tensor.randn({4, 3}, {seed = 7})
print("same seed, bitwise equal:", x:equal(y))

-- FP64 sums in different orders differ in the last bits; rounding to FP32 usually hides it.
local v = vt.tensor.randn({1000000}, {seed = 1})
local forward = v:sum()
local backward = v:view(1000, 1000):t():contiguous():sum()
print(string.format("FP64 sum in two orders: %.17g vs %.17g (equal: %s)", forward, backward,
                    tostring(forward == backward)))

local path = os.tmpname() .. ".npy"
x:save(path)
print("saved and reloaded .npy, bitwise equal:", vt.tensor.load(path):equal(x))
os.remove(path)
