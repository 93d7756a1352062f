-- Training-step cost of verifiability, measured in one run on this machine:
-- trainer (FP64 + rounding + logging) and auditor (FP64 + replay) against a plain FP64 step
-- and a plain FP32 step of the same model and batch, for ResNet-18 (width 16) on
-- Fashion-MNIST and a 4-layer GPT (d 256) on the Shakespeare corpus.
--
--   vtrun scripts/bench/training.lua [steps=6] [profile=native]
-- Last line: one JSON object with trainer_over_fp64, auditor_over_fp64, log_bytes_per_step.
local steps = tonumber(arg[1]) or 6
local profile = arg[2] or "native"
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local corpus = os.getenv("VTRUN_CORPUS") or (here .. "../../../shared/data/shakespeare.txt")

local workdir = os.tmpname() .. ".bench"
os.execute("rm -rf '" .. workdir .. "' && mkdir -p '" .. workdir .. "'")

local clock = vt.clock

local models = {
  {
    name = "resnet18-w16",
    data = vt.data.fashion_mnist{limit = 8192},
    model = vt.models.resnet{depth = 18, width = 16, in_channels = 1, classes = 10},
    optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
    batch = 64,
  },
  {
    name = "gpt-4x256",
    data = vt.data.text{path = corpus, context = 64},
    model = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64},
    optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01},
    batch = 8,
  },
}

-- Seconds per step over `steps` steps after one warm-up step.
local function time_steps(runner)
  runner:step()
  local t0 = clock()
  local bytes, logged, elements = 0, 0, 0
  for _ = 1, steps do
    local r = runner:step()
    bytes, logged, elements = bytes + r.log_bytes, logged + r.logged, elements + r.elements
  end
  return (clock() - t0) / steps, bytes / steps, logged / steps, elements / steps
end

local results = {}
print(string.format("%d timed steps per arm after one warm-up step, profile %s, %d threads", steps, profile, vt.threads()))
print(string.format("%-14s %9s %9s %9s %9s %8s %8s %8s %12s %10s", "model", "fp32 s", "fp64 s", "trainer s",
                    "auditor s", "tr/fp64", "au/fp64", "tr/fp32", "log B/step", "logged %"))
for _, m in ipairs(models) do
  -- The run is two steps longer than what is timed, so no checkpoint falls in the timed
  -- window (checkpoint hashing is measured by scripts/bench/store.lua).
  local spec = vt.spec{model = m.model, data = m.data, optim = m.optim, batch = m.batch, steps = steps + 2,
                       seed = 1, checkpoint_every = steps + 2}
  local function plain(mode)
    return vt.trainer{spec = spec, data = m.data, mode = mode, profile = profile}
  end
  local fp32 = time_steps(plain("fp32"))
  local fp64 = time_steps(plain("fp64"))
  local trainer = vt.trainer{spec = spec, data = m.data, profile = profile,
                             store = vt.store.open(workdir .. "/" .. m.name .. "-t")}
  local tr, bytes, logged, elements = time_steps(trainer)
  local auditor = vt.auditor{spec = spec, data = m.data, logs = trainer, profile = profile,
                             store = vt.store.open(workdir .. "/" .. m.name .. "-a")}
  local au = time_steps(auditor)
  local row = {model = m.name, fp32_s = fp32, fp64_s = fp64, trainer_s = tr, auditor_s = au,
               trainer_over_fp64 = tr / fp64, auditor_over_fp64 = au / fp64, trainer_over_fp32 = tr / fp32,
               log_bytes_per_step = bytes, logged_fraction = logged / elements, rounded_per_step = elements}
  results[#results + 1] = row
  print(string.format("%-14s %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %12.0f %9.2f%%", m.name, fp32, fp64, tr, au,
                      row.trainer_over_fp64, row.auditor_over_fp64, row.trainer_over_fp32, bytes, 100 * logged / elements))
end
os.execute("rm -rf '" .. workdir .. "'")

local function json_number(v) return string.format("%.6g", v) end
local parts = {}
for _, key in ipairs({"trainer_over_fp64", "auditor_over_fp64", "log_bytes_per_step"}) do
  local worst = 0
  for _, r in ipairs(results) do worst = math.max(worst, r[key]) end
  parts[#parts + 1] = string.format('"%s": %s', key, json_number(worst))
end
local per_model = {}
for _, r in ipairs(results) do
  per_model[#per_model + 1] = string.format('"%s": {"trainer_over_fp64": %s, "auditor_over_fp64": %s, "trainer_over_fp32": %s, "log_bytes_per_step": %s, "logged_fraction": %s}',
    r.model, json_number(r.trainer_over_fp64), json_number(r.auditor_over_fp64), json_number(r.trainer_over_fp32),
    json_number(r.log_bytes_per_step), json_number(r.logged_fraction))
end
print("{" .. table.concat(parts, ", ") .. ', "models": {' .. table.concat(per_model, ", ") .. "}}")
