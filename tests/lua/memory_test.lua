-- vt.memory() and vt.release_memory(): the caching CPU allocator as scripts see it
-- (runtime/common/cpu_allocator.h). A large tensor's block serves the next tensor of its size,
-- small ones never enter the cache, and release_memory empties it.
local T = require "vt.test"
local s = T.suite("memory")

s:test("a large tensor's block is reused; small ones stay out; release empties the cache", function()
  local m0 = vt.memory()
  local off = os.getenv("VTRUN_ALLOC_CACHE") == "off" or os.getenv("VTRUN_ALLOC_CACHE") == "0"
  T.assert_eq(m0.caching, not off)
  if off then return end  -- LibTorch's default allocator: nothing to count
  T.assert_eq(m0.large_block, 32 * 2 ^ 20)
  T.assert_true(m0.cache_limit > 0)
  local n = m0.large_block / 8 + 1000  -- doubles: just above the large-block size
  local x = vt.tensor.zeros({n})
  local m1 = vt.memory()
  T.assert_eq(m1.misses + m1.hits, m0.misses + m0.hits + 1)
  T.assert_true(m1.in_use >= m0.in_use + n * 8)
  x = nil
  collectgarbage("collect")
  local m2 = vt.memory()
  T.assert_eq(m2.in_use, m0.in_use)
  T.assert_true(m2.cached >= n * 8)
  local y = vt.tensor.zeros({n})
  T.assert_eq(vt.memory().hits, m2.hits + 1)
  T.assert_eq(y:sum(), 0)
  y = nil
  collectgarbage("collect")
  local small = vt.tensor.zeros({1000})
  local m3 = vt.memory()
  T.assert_eq(m3.hits + m3.misses, m2.hits + m2.misses + 1)
  vt.release_memory()
  T.assert_eq(vt.memory().cached, 0)
  T.assert_eq(small:sum(), 0)
end)

local _, failed = T.run({exit = false})
os.exit(failed == 0 and 0 or 1)
