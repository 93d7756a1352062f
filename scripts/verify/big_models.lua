-- The paper's sizes: ResNet-50 (CIFAR-style, 3 channels, width 64) and GPT-2 small (117M)
-- each run two verified steps: a trainer on `native` with logs, an auditor on `splitk4`
-- replaying them, roots compared. Prints step times and log bytes per step.
--
--   vtrun scripts/verify/big_models.lua [models=resnet50|gpt2|both] [dir=]
-- Needs about 8 GB of memory for GPT-2 small (FP64 weights, gradients and Adam state).
local args = vt.args({models = "both", dir = ""}, arg)
local which = args.models
-- Its stores go to a fresh directory (inside workdir when given), removed at the end.
local workdir = vt.fs.tmpdir("big-models", args.dir ~= "" and args.dir or nil)
local corpus = vt.corpus

local configs = {}
if which == "resnet50" or which == "both" then
  configs[#configs + 1] = {
    name = "resnet50",
    data = vt.data.synthetic{size = 64, input_shape = {3, 32, 32}, classes = 10, seed = 1},
    model = vt.models.resnet{depth = 50, width = 64, in_channels = 3, classes = 10},
    optim = vt.optim.sgd{lr = 0.01, momentum = 0.9}, batch = 8,
  }
end
if which == "gpt2" or which == "both" then
  configs[#configs + 1] = {
    name = "gpt2-small",
    data = vt.data.text{path = corpus, context = 64},
    model = vt.models.gpt2{},  -- 12 layers, d 768, 12 heads, vocab 50257, context 1024
    optim = vt.optim.adamw{lr = 1e-4}, batch = 8,
  }
end

local failed = 0
for _, c in ipairs(configs) do
  local spec = vt.spec{model = c.model, data = c.data, optim = c.optim, batch = c.batch, steps = 2, seed = 1,
                       checkpoint_every = 2}
  print(string.format("%s: %.1fM parameters, batch %d", c.name, spec:parameters() / 1e6, c.batch))
  local trainer = vt.trainer{spec = spec, data = c.data, store = vt.store.open(workdir .. "/" .. c.name .. "-t")}
  for step, r in trainer:steps() do
    print(string.format("  trainer step %d: %.1f s, loss %.4f, %d rounded values, %.2f%% logged, %.1f MB of log",
                        step, r.seconds, r.loss, r.elements, 100 * r.logged / r.elements, r.log_bytes / 1e6))
  end
  local auditor = vt.auditor{spec = spec, data = c.data, logs = trainer, profile = "splitk4",
                             store = vt.store.open(workdir .. "/" .. c.name .. "-a")}
  for step, r in auditor:steps() do
    print(string.format("  auditor step %d: %.1f s, %d corrections, %d illegitimate", step, r.seconds, r.corrections,
                        r.illegitimate))
  end
  local same = auditor:root() == trainer:root()
  print(string.format("  roots %s (%s)", same and "equal" or "DIFFER", trainer:root():sub(1, 16)))
  if not same then failed = failed + 1 end
end
vt.fs.remove(workdir)
print(string.format("%d passed, %d failed", #configs - failed, failed))
os.exit(failed == 0 and 0 or 1)
