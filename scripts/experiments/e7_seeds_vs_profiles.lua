-- E7 (paper Table 6): how far apart plain FP32 training ends up from device nondeterminism
-- (same seed, another profile) against data order (another seed, same profile): L2 distance
-- of the weights and of the outputs on held-out examples, over `pairs` pairs each.
--
--   vtrun scripts/experiments/e7_seeds_vs_profiles.lua [model=mlp] [steps=100] [pairs=10] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "mlp", steps = 100, pairs = 10, out = ""}, arg)
local out = lib.outdir("e7_seeds_vs_profiles", a.out)
local s = lib.setup(a.model)
local eval = vt.game.data(s.eval)

local function train(seed, profile)
  local spec = lib.spec(s, a.steps, {bits = 32, band = 0.25}, {seed = seed})
  local r = vt.trainer{spec = spec, data = s.data, mode = "fp32", profile = profile}
  for _ = 1, a.steps do r:step() end
  return r:state(), r:evaluate(eval, {limit = 512}).outputs
end

local others = {"splitk4", "blocked"}
local header = {"pair", "kind", "weights L2", "outputs L2"}
local rows = {}
local sums = {device = {0, 0}, seed = {0, 0}}
for i = 1, a.pairs do
  local w1, o1 = train(i, "native")
  local w2, o2 = train(i, others[(i - 1) % #others + 1])
  local w3, o3 = train(i + 1000, "native")
  local dw, dout = lib.l2(w1, w2), math.sqrt(((o1 - o2) * (o1 - o2)):sum())
  local sw, sout = lib.l2(w1, w3), math.sqrt(((o1 - o3) * (o1 - o3)):sum())
  rows[#rows + 1] = {i, "device (native vs " .. others[(i - 1) % #others + 1] .. ")", dw, dout}
  rows[#rows + 1] = {i, "seed: init and data order (" .. i .. " vs " .. (i + 1000) .. ")", sw, sout}
  sums.device[1], sums.device[2] = sums.device[1] + dw, sums.device[2] + dout
  sums.seed[1], sums.seed[2] = sums.seed[1] + sw, sums.seed[2] + sout
end
print("machine: " .. lib.machine())
print(string.format("E7: %s, plain FP32, %d steps, %d pairs each", a.model, a.steps, a.pairs))
lib.table(header, rows)
lib.csv(out .. "/e7_seeds_vs_profiles.csv", header, rows)
local result = {experiment = "E7", mean_weights_l2_device = sums.device[1] / a.pairs, mean_weights_l2_seed = sums.seed[1] / a.pairs,
                mean_outputs_l2_device = sums.device[2] / a.pairs, mean_outputs_l2_seed = sums.seed[2] / a.pairs}
print(string.format("mean weights L2: device %.3e, data order %.3e (ratio %.1e)", result.mean_weights_l2_device,
                    result.mean_weights_l2_seed, result.mean_weights_l2_device / result.mean_weights_l2_seed))
print(vt.json.encode(result))
