-- The LibTorch baseline (vt.torch_baseline, runtime/train/baseline.h) computes the same model
-- as vtrun: in FP64 its losses equal the plain FP64 engine's up to summation order, so the
-- benchmarks that measure vtrun against it compare like with like (a baseline fast because
-- it computes something else would fail here). And its errors.
local T = require "vt.test"

local s = T.suite("torch baseline")

local function compare(model, data, optim, steps)
  local spec = vt.spec{model = model, data = data, optim = optim, steps = steps, batch = 8}
  local engine = vt.trainer{spec = spec, data = data, mode = "fp64"}
  local torch = vt.torch_baseline{spec = spec, data = data}
  local worst_first, worst = 0, 0
  for i = 1, steps do
    local a, b = engine:step().loss, torch:step()
    local rel = math.abs(a - b) / math.abs(a)
    if i == 1 then worst_first = rel end
    worst = math.max(worst, rel)
  end
  T.assert_eq(torch:steps_run(), steps)
  return worst_first, worst
end

s:test("MLP, ResNet-18, ResNet-50 and GPT-2 in plain LibTorch give vtrun's FP64 losses", function()
  local images, text = vt.data.fashion_mnist{limit = 64}, vt.data.text{path = vt.corpus, context = 16}
  local cases = {
    {"mlp", vt.models.mlp{hidden = {32, 16}}, images, vt.optim.sgd{lr = 0.05, momentum = 0.9, weight_decay = 1e-4}},
    {"resnet-18", vt.models.resnet{depth = 18, width = 4, in_channels = 1}, images,
     vt.optim.sgd{lr = 0.05, momentum = 0.9, nesterov = true}},
    {"resnet-50", vt.models.resnet{depth = 50, width = 4, in_channels = 1}, images, vt.optim.sgd{lr = 0.01}},
    {"gpt2", vt.models.gpt2{layers = 2, d_model = 32, heads = 2, vocab = 256, context = 16}, text,
     vt.optim.adamw{lr = 1e-3, weight_decay = 0.01, schedule = "cosine", warmup = 2}},
  }
  for _, c in ipairs(cases) do
    local first, worst = compare(c[2], c[3], c[4], 4)
    T.assert_true(first < 1e-12, c[1] .. ": first loss differs by " .. first)
    T.assert_true(worst < 1e-6, c[1] .. ": losses over 4 steps differ by up to " .. worst)
  end
  -- Control: another learning rate is another run, and the comparison sees it.
  local data = vt.data.fashion_mnist{limit = 64}
  local a = vt.spec{model = vt.models.mlp{hidden = {16}}, data = data, optim = vt.optim.sgd{lr = 0.05}, steps = 2, batch = 8}
  local b = vt.spec{model = vt.models.mlp{hidden = {16}}, data = data, optim = vt.optim.sgd{lr = 0.5}, steps = 2, batch = 8}
  local ta, tb = vt.torch_baseline{spec = a, data = data}, vt.torch_baseline{spec = b, data = data}
  ta:step() tb:step()
  T.assert_true(ta:step() ~= tb:step(), "a second step after another update differs")
end)

s:test("runs on the default thread count, which vt.set_threads sets, whatever a profile left", function()
  local before = vt.threads()
  local data = vt.data.fashion_mnist{limit = 64}
  local spec = vt.spec{model = vt.models.mlp{hidden = {8}}, data = data, steps = 4, batch = 8}
  vt.set_threads(3)
  local native = vt.trainer{spec = spec, data = data, mode = "fp64"}
  native:step()
  T.assert_eq(vt.threads(), 3, "a native step keeps the count vt.set_threads set")
  vt.trainer{spec = spec, data = data, mode = "fp64", profile = "splitk4"}:step()
  T.assert_eq(vt.threads(), 1, "splitk4 runs on one thread")
  vt.torch_baseline{spec = spec, data = data}:step()
  T.assert_eq(vt.threads(), 3, "the baseline runs on the default count, not splitk4's")
  vt.set_threads(before)
end)

s:test("FP32 runs and trains", function()
  local data = vt.data.fashion_mnist{limit = 256}
  local spec = vt.spec{model = vt.models.mlp{hidden = {32}}, data = data, optim = vt.optim.sgd{lr = 0.1}, steps = 20, batch = 32}
  local b = vt.torch_baseline{spec = spec, data = data, dtype = "float32"}
  local first = b:step()
  local last
  for _ = 2, 20 do last = b:step() end
  T.assert_true(last < first, "the loss falls: " .. first .. " -> " .. last)
end)

s:test("errors name what is allowed", function()
  local data = vt.data.fashion_mnist{limit = 64}
  local spec = vt.spec{model = vt.models.mlp{hidden = {8}}, data = data, steps = 2, batch = 8}
  T.assert_error(function() vt.torch_baseline{spec = spec, data = data, dtype = "float16"} end, "float32 or float64")
  T.assert_error(function() vt.torch_baseline{data = data} end, "option 'spec' is required")
  T.assert_error(function() vt.torch_baseline{spec = spec, data = vt.data.fashion_mnist{limit = 32}} end, "digest")
  local lua = vt.spec{model = vt.nn.model{source = "return vt.nn.Sequential{vt.nn.Flatten(), vt.nn.Linear(784, 10)}"},
                      data = data, steps = 2, batch = 8}
  T.assert_error(function() vt.torch_baseline{spec = lua, data = data} end, "covers the built%-in models")
end)

local _, failed = T.run({exit = false})
os.exit(failed == 0 and 0 or 1)
