-- Without the logs, honest replicas drift apart. Two in-process profiles train the same spec
-- in lock-step, in plain FP32, plain FP64, and FP64 rounded to FP32 without logs; after every
-- step their states are compared bit for bit, and the first step where they differ is
-- reported (with the logs, scripts/verify/pairs.lua shows they never do).
--
--   vtrun scripts/verify/divergence.lua [model=gpt|mlp|resnet] [steps=200] [profile_a=native] [profile_b=splitk4]
--
-- Exits 1 if the plain FP32 or the rounded-without-logs pair never diverges within `steps`
-- (that would mean the profiles do not really differ), so it doubles as a test.
local a = vt.args({model = "gpt", steps = 200, profile_a = "native", profile_b = "splitk4"}, arg)
local model, steps, pa, pb = a.model, a.steps, a.profile_a, a.profile_b
local corpus = vt.corpus

local data, m, optim, batch
if model == "gpt" then
  data = vt.data.text{path = corpus, context = 64}
  m = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64}
  optim, batch = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01}, 8
elseif model == "resnet" then
  data = vt.data.fashion_mnist{limit = 8192}
  m = vt.models.resnet{depth = 18, width = 16, in_channels = 1}
  optim, batch = vt.optim.sgd{lr = 0.05, momentum = 0.9}, 32
else
  data = vt.data.fashion_mnist{limit = 8192}
  m = vt.models.mlp{input_shape = {1, 28, 28}, hidden = {128, 64}}
  optim, batch = vt.optim.sgd{lr = 0.05, momentum = 0.9}, 64
end
local spec = vt.spec{model = m, data = data, optim = optim, batch = batch, steps = steps, seed = 1}

local function same(a, b)
  local sa, sb = a:state(), b:state()
  for name, t in pairs(sa) do
    if not t:equal(sb[name]) then return false, name end
  end
  return true
end

print(string.format("model %s, %d steps, profiles %s and %s", model, steps, pa, pb))
local results = {}
for _, mode in ipairs({"fp32", "fp64", "rounded"}) do
  local a = vt.trainer{spec = spec, data = data, mode = mode, profile = pa}
  local b = vt.trainer{spec = spec, data = data, mode = mode, profile = pb}
  local first, tensor = nil, nil
  for step = 1, steps do
    a:step()
    b:step()
    local ok, name = same(a, b)
    if not ok then
      first, tensor = step, name
      break
    end
  end
  results[mode] = first or false
  print(string.format("%-8s %s", mode, first and string.format("first differs after step %d (%s)", first, tensor)
                                        or string.format("identical through step %d", steps)))
end
print(string.format('{"model": "%s", "steps": %d, "fp32_first_divergence": %s, "fp64_first_divergence": %s, "rounded_first_divergence": %s}',
                    model, steps, tostring(results.fp32 or "null"), tostring(results.fp64 or "null"),
                    tostring(results.rounded or "null")))
os.exit((results.fp32 and results.rounded) and 0 or 1)
