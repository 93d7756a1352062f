-- Replay holds on settings that are not shipped profiles: an auditor in a process whose
-- OpenBLAS kernels (OPENBLAS_CORETYPE), BLAS threads and ATen vector width no profile names
-- replays a trainer's run to the same root with windows calibrated over the in-process
-- profiles only. The control: each setting really computes a matrix product and a sum
-- with other bits than the trainer's process.
--
-- Run as `vtrun unlisted_settings_test.lua` (the test) or, in the children it spawns,
-- `vtrun unlisted_settings_test.lua audit|control ...`.
local T = require "vt.test"

local function setup(model, round)
  local data, m, optim
  if model == "mlp" then
    data = vt.data.synthetic{size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 3}
    m = vt.models.mlp{input_shape = {1, 8, 8}, hidden = {64, 32}, classes = 4}
    optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}
  elseif model == "resnet" then
    data = vt.data.synthetic{size = 256, input_shape = {1, 8, 8}, classes = 4, seed = 3}
    m = vt.models.resnet{depth = 18, width = 4, in_channels = 1, classes = 4}
    optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}
  else
    data = vt.data.text{path = vt.corpus, context = 16}
    m = vt.models.gpt2{layers = 2, d_model = 32, heads = 2, vocab = 256, context = 16}
    optim = vt.optim.adamw{lr = 1e-3, weight_decay = 0.01}
  end
  local spec = vt.spec{model = m, data = data, optim = optim, batch = 8, steps = 12, seed = 1, checkpoint_every = 4,
                       round = round}
  return spec, data
end

local function control_tensors()
  local a = vt.tensor.randn({64, 300}, {seed = 1})
  local b = vt.tensor.randn({300, 50}, {seed = 2})
  return {mm = vt.ops.matmul(a, b), sum = vt.ops.sum(a, {1}), softmax = vt.ops.softmax(a)}
end

local function read(path)
  local f = assert(io.open(path, "rb"))
  local bytes = f:read("*a")
  f:close()
  return bytes
end

if arg[1] == "audit" then
  local model, trainer_dir, dir, windows = arg[2], arg[3], arg[4], arg[5]
  local spec, data = setup(model, vt.json.decode(read(windows)))
  local auditor = vt.auditor{spec = spec, data = data, logs = vt.store.open(trainer_dir, {read_only = true}),
                             store = vt.store.open(dir)}
  local r = auditor:run{progress = false}
  print(vt.json.encode{root = r.root, illegitimate = r.illegitimate, corrections = r.corrections})
  os.exit(0)
elseif arg[1] == "control" then
  vt.safetensors.save(arg[2], control_tensors())
  print(vt.json.encode{aten = vt.profile().aten_capability})
  os.exit(0)
end

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")
local self = debug.getinfo(1, "S").source:sub(2)

-- Settings no shipped profile uses (all run under the `native` profile's own orders).
local settings = {
  {name = "OpenBLAS Sandybridge kernels (AVX, no FMA), 2 BLAS threads",
   env = {"OPENBLAS_CORETYPE=Sandybridge", "OPENBLAS_NUM_THREADS=2", "OMP_NUM_THREADS=2"}},
  {name = "OpenBLAS Prescott kernels (SSE3), ATen scalar kernels",
   env = {"OPENBLAS_CORETYPE=Prescott", "ATEN_CPU_CAPABILITY=default"}},
}

-- Runs this file in a child with `env`; returns its last line decoded.
local function child(env, ...)
  local p = vt.process.spawn({vt.executable(), self, ...}, {env = env})
  local last, line = nil, nil
  repeat
    line = p:receive(600)
    if line then last = line end
  until line == nil
  T.assert_eq(p:wait(60), 0, "child " .. table.concat({...}, " "))
  return vt.json.decode(last)
end

local s = T.suite("unlisted settings")

s:test("each setting computes other bits than the trainer's process (the control)", function()
  vt.safetensors.save(tmp .. "/here.safetensors", control_tensors())
  local here = read(tmp .. "/here.safetensors")
  for i, setting in ipairs(settings) do
    local path = tmp .. "/control-" .. i .. ".safetensors"
    child(setting.env, "control", path)
    T.assert_true(read(path) ~= here, setting.name .. ": same bits as the trainer's process")
  end
end)

for _, model in ipairs{"mlp", "resnet", "gpt"} do
  s:test(model .. ": an auditor on each unlisted setting replays to the trainer's root", function()
    local spec, data = setup(model, {bits = 32, band = 0.25})
    local cal = vt.calibrate{spec = spec, data = data, profiles = {"native", "splitk4", "blocked"}, steps = 3}
    local windows = tmp .. "/" .. model .. "-windows.json"
    local f = assert(io.open(windows, "w"))
    f:write(vt.json.encode(cal.round))
    f:close()
    local calibrated = setup(model, cal.round)
    local trainer_dir = tmp .. "/" .. model .. "-trainer"
    local r = vt.trainer{spec = calibrated, data = data, store = vt.store.open(trainer_dir)}:run{progress = false}
    for i, setting in ipairs(settings) do
      local a = child(setting.env, "audit", model, trainer_dir, tmp .. "/" .. model .. "-audit-" .. i, windows)
      T.assert_eq(a.root, r.root, setting.name)
      T.assert_eq(a.illegitimate, 0, setting.name)
    end
  end)
end

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
