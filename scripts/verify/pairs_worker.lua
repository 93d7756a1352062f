-- Worker for pairs.lua, run under one profile:
--   vtrun --profile P pairs_worker.lua train DIR MODEL STEPS
--   vtrun --profile Q pairs_worker.lua audit TRAINER_DIR DIR MODEL STEPS
-- Prints RESULT key=value lines.
local command = arg[1]
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local corpus = os.getenv("VTRUN_CORPUS") or (here .. "../../../shared/data/shakespeare.txt")

local function setup(model, steps)
  local data, m, optim, batch
  if model == "mlp" then
    data = vt.data.fashion_mnist{limit = 8192}
    m = vt.models.mlp{input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10}
    optim, batch = vt.optim.sgd{lr = 0.05, momentum = 0.9}, 64
  elseif model == "resnet" then
    data = vt.data.fashion_mnist{limit = 8192}
    m = vt.models.resnet{depth = 18, width = 16, in_channels = 1, classes = 10}
    optim, batch = vt.optim.sgd{lr = 0.05, momentum = 0.9, weight_decay = 5e-4}, 32
  elseif model == "gpt" then
    data = vt.data.text{path = corpus, context = 64}
    m = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64}
    optim, batch = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01}, 8
  else
    error("model must be mlp, resnet or gpt, got " .. tostring(model))
  end
  local spec = vt.spec{model = m, data = data, optim = optim, batch = batch, steps = steps, seed = 1,
                       checkpoint_every = 10}
  return spec, data
end

local clock = vt.clock

if command == "train" then
  local dir, model, steps = arg[2], arg[3], tonumber(arg[4])
  local spec, data = setup(model, steps)
  local t0 = clock()
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir), profile = vt.profile().name}
  local r = trainer:run{progress = false}
  print("RESULT root=" .. r.root)
  print(string.format("RESULT seconds=%.1f", clock() - t0))
  print(string.format("RESULT logged_per_step=%.0f", r.logged / steps))
elseif command == "audit" then
  local trainer_dir, dir, model, steps = arg[2], arg[3], arg[4], tonumber(arg[5])
  local spec, data = setup(model, steps)
  local logs = vt.store.open(trainer_dir, {read_only = true})
  local auditor = vt.auditor{spec = spec, data = data, logs = logs, store = vt.store.open(dir),
                             profile = vt.profile().name}
  local r = auditor:run{progress = false}
  print("RESULT root=" .. r.root)
  print("RESULT corrections=" .. r.corrections)
  print("RESULT illegitimate=" .. r.illegitimate)
  print("RESULT first_leaf=" .. tostring(vt.train.first_differing_leaf(logs, "run", auditor:store(), "run")))
else
  error("usage: pairs_worker.lua train DIR MODEL STEPS | audit TRAINER_DIR DIR MODEL STEPS")
end
