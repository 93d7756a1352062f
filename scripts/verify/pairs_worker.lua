-- Worker for pairs.lua, run under one profile:
--   vtrun --profile P pairs_worker.lua train DIR MODEL STEPS [WINDOWS.json]
--   vtrun --profile Q pairs_worker.lua audit TRAINER_DIR DIR MODEL STEPS [WINDOWS.json]
--   vtrun pairs_worker.lua calibrate OUT.json MODEL STEPS PROFILES   (calibrated windows)
-- Prints RESULT key=value lines. WINDOWS.json holds a spec's round table (from calibrate);
-- without it the spec uses the paper's window.
local command = arg[1]
local corpus = vt.corpus

local function recipe(model)
  if model == "gpt" then return {kind = "text", path = corpus, context = 64} end
  return {kind = "fashion_mnist", limit = 8192}
end

local function setup(model, steps, windows)
  local data, m, optim, batch
  local round = (windows and windows ~= "") and vt.json.decode(assert(io.open(windows)):read("*a")) or nil
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
                       checkpoint_every = 10, round = round}
  return spec, data
end

local clock = vt.clock

-- Log bytes of a stored run per step, without the trace records (diagnostics, not log).
local function log_bytes(store, steps)
  local run = store:run("run")
  local bytes = 0
  for _, boundary, _, value in run:records{} do
    if boundary ~= "~trace" then bytes = bytes + #value end
  end
  return bytes / steps
end

if command == "calibrate" then
  local out, model, steps, profiles = arg[2], arg[3], tonumber(arg[4]), arg[5]
  local spec = setup(model, steps)
  local list = {}
  for p in profiles:gmatch("[^,]+") do list[#list + 1] = p end
  local cal = vt.calibrate{spec = spec, data = recipe(model), profiles = list, steps = 10}
  local f = assert(io.open(out, "w"))
  f:write(vt.json.encode(cal.round))
  f:close()
  print(string.format("RESULT seconds=%.1f", cal.seconds))
  print("RESULT root=-")
elseif command == "train" then
  local dir, model, steps = arg[2], arg[3], tonumber(arg[4])
  local spec, data = setup(model, steps, arg[5])
  local t0 = clock()
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir), profile = vt.profile().name}
  local r = trainer:run{progress = false}
  print("RESULT root=" .. r.root)
  print(string.format("RESULT seconds=%.1f", clock() - t0))
  print(string.format("RESULT logged_per_step=%.0f", r.logged / steps))
  print(string.format("RESULT logged_fraction=%.3g", r.logged / r.elements))
  print(string.format("RESULT log_bytes_per_step=%.0f", log_bytes(trainer:store(), steps)))
elseif command == "audit" then
  local trainer_dir, dir, model, steps = arg[2], arg[3], arg[4], tonumber(arg[5])
  local spec, data = setup(model, steps, arg[6])
  local logs = vt.store.open(trainer_dir, {read_only = true})
  local auditor = vt.auditor{spec = spec, data = data, logs = logs, store = vt.store.open(dir),
                             profile = vt.profile().name}
  local t0 = clock()
  local r = auditor:run{progress = false}
  print("RESULT root=" .. r.root)
  print(string.format("RESULT seconds=%.1f", clock() - t0))
  print("RESULT corrections=" .. r.corrections)
  print("RESULT illegitimate=" .. r.illegitimate)
  print("RESULT first_leaf=" .. tostring(vt.train.first_differing_leaf(logs, "run", auditor:store(), "run")))
else
  error("usage: pairs_worker.lua train DIR MODEL STEPS | audit TRAINER_DIR DIR MODEL STEPS")
end
