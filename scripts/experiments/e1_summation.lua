-- E1 (paper Table 1): summing the same FP32 numbers in different orders gives different FP32
-- results; rounding the results to fewer bits hides the difference, except when a rounding
-- boundary falls between them, which no fixed b can rule out.
--
--   vtrun scripts/experiments/e1_summation.lua [n=10000] [trials=1000] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({n = 10000, trials = 1000, out = ""}, arg)
local out = lib.outdir("e1_summation", a.out)

-- Orders: one pass, and the sum of 2, 3, 4, 7 and 16 chunk sums (FP32 throughout).
local chunkings = {1, 2, 3, 4, 7, 16}
local function chunked_sum(x, chunks)
  local n = x:numel()
  local total = vt.tensor(0, {dtype = "float32"})
  local step = math.ceil(n / chunks)
  for start = 1, n, step do
    total = total + x:narrow(1, start, math.min(step, n - start + 1)):sum(1)
  end
  return total:double():item()
end

local bits_list = {32, 28, 24, 20, 19, 16}
local all_equal, distinct_total = {}, 0
for _, b in ipairs(bits_list) do all_equal[b] = 0 end
for trial = 1, a.trials do
  local x = vt.tensor.randn({a.n}, {seed = trial, dtype = "float32"})
  local sums = {}
  for i, c in ipairs(chunkings) do sums[i] = chunked_sum(x, c) end
  local distinct = {}
  for _, v in ipairs(sums) do distinct[v] = true end
  local count = 0
  for _ in pairs(distinct) do count = count + 1 end
  distinct_total = distinct_total + count
  for _, b in ipairs(bits_list) do
    local r = vt.round(vt.tensor(sums), {bits = b, log = false})
    local first, same = r[1], true
    for i = 2, #sums do same = same and r[i] == first end
    if same then all_equal[b] = all_equal[b] + 1 end
  end
end
local header = {"b (bits of the FP32 word kept)", "trials where all 6 orders agree", "%"}
local rows = {}
for _, b in ipairs(bits_list) do rows[#rows + 1] = {b, all_equal[b], 100 * all_equal[b] / a.trials} end
print("machine: " .. lib.machine())
print(string.format("E1: sums of %d standard normal FP32 numbers in 6 orders, %d trials; %.2f distinct FP32 results per trial on average",
                    a.n, a.trials, distinct_total / a.trials))
lib.table(header, rows)
lib.csv(out .. "/e1_summation.csv", header, rows)
print(vt.json.encode{experiment = "E1", distinct_per_trial = distinct_total / a.trials, agree_b32 = all_equal[32] / a.trials,
                     agree_b19 = all_equal[19] / a.trials, agree_b16 = all_equal[16] / a.trials})
