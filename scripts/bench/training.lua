-- Training-step cost of verifiability, measured in one run on this machine:
-- trainer (FP64 + rounding + logging) and auditor (FP64 + replay) against a plain FP64 step
-- and a plain FP32 step of the same model and batch, for ResNet-18 (width 16) on
-- Fashion-MNIST and a 4-layer GPT (d 256) on the Shakespeare corpus. The trainer and auditor
-- run twice: with the paper's window (band 1/4, about half of all values logged) and with
-- calibrated windows (vt.calibrate over 2 steps on this profile and one other, untimed).
--
--   vtrun scripts/bench/training.lua [steps=6] [profile=native]
-- Last line: one JSON object with trainer_over_fp64, auditor_over_fp64, log_bytes_per_step
-- (paper window; the worst model) and the same with the prefix calibrated_, then per model.
local a = vt.args({steps = 6, profile = "native"}, arg)
local steps, profile = a.steps, a.profile
local corpus = vt.corpus

local workdir = vt.fs.tmpdir("bench-training")

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

-- Windows: the paper's (band 1/4) and calibrated ones, measured by vt.calibrate over the
-- first steps on `profile` and a second in-process profile (not timed).
local function calibrated_round(spec, data)
  local other = profile == "splitk4" and "native" or "splitk4"
  return vt.calibrate{spec = spec, data = data, profiles = {profile, other}, steps = 2}.round
end

local results = {}
print(string.format("%d timed steps per arm after one warm-up step, profile %s, %d threads", steps, profile, vt.threads()))
print(string.format("%-14s %-10s %9s %9s %9s %9s %8s %8s %8s %12s %10s", "model", "window", "fp32 s", "fp64 s",
                    "trainer s", "auditor s", "tr/fp64", "au/fp64", "tr/fp32", "log B/step", "logged %"))
for _, m in ipairs(models) do
  -- The run is two steps longer than what is timed, so no checkpoint falls in the timed
  -- window (checkpoint hashing is measured by scripts/bench/store.lua).
  local function make_spec(round)
    return vt.spec{model = m.model, data = m.data, optim = m.optim, batch = m.batch, steps = steps + 2,
                   seed = 1, checkpoint_every = steps + 2, round = round}
  end
  local spec = make_spec(nil)
  local function plain(mode)
    return vt.trainer{spec = spec, data = m.data, mode = mode, profile = profile}
  end
  local fp32 = time_steps(plain("fp32"))
  local fp64 = time_steps(plain("fp64"))
  local row = {model = m.name, fp32_s = fp32, fp64_s = fp64}
  for _, window in ipairs({"paper", "calibrated"}) do
    local wspec = window == "paper" and spec or make_spec(calibrated_round(spec, m.data))
    local dir = workdir .. "/" .. m.name .. "-" .. window
    local trainer = vt.trainer{spec = wspec, data = m.data, profile = profile, store = vt.store.open(dir .. "-t")}
    local tr, bytes, logged, elements = time_steps(trainer)
    local auditor = vt.auditor{spec = wspec, data = m.data, logs = trainer, profile = profile,
                               store = vt.store.open(dir .. "-a")}
    local au = time_steps(auditor)
    local prefix = window == "paper" and "" or "calibrated_"
    row[prefix .. "trainer_over_fp64"] = tr / fp64
    row[prefix .. "auditor_over_fp64"] = au / fp64
    row[prefix .. "trainer_over_fp32"] = tr / fp32
    row[prefix .. "log_bytes_per_step"] = bytes
    row[prefix .. "logged_fraction"] = logged / elements
    row.rounded_per_step = elements
    print(string.format("%-14s %-10s %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %12.0f %9.4f%%", m.name, window, fp32, fp64,
                        tr, au, tr / fp64, au / fp64, tr / fp32, bytes, 100 * logged / elements))
    trainer, auditor = nil, nil
    collectgarbage("collect")
  end
  results[#results + 1] = row
end
vt.fs.remove(workdir)

local function json_number(v) return string.format("%.6g", v) end
local keys = {"trainer_over_fp64", "auditor_over_fp64", "trainer_over_fp32", "log_bytes_per_step", "logged_fraction"}
local parts = {}
for _, prefix in ipairs({"", "calibrated_"}) do
  for i = 1, 3 do
    local key = prefix .. ({"trainer_over_fp64", "auditor_over_fp64", "log_bytes_per_step"})[i]
    local worst = 0
    for _, r in ipairs(results) do worst = math.max(worst, r[key]) end
    parts[#parts + 1] = string.format('"%s": %s', key, json_number(worst))
  end
end
local per_model = {}
for _, r in ipairs(results) do
  local fields = {}
  for _, prefix in ipairs({"", "calibrated_"}) do
    for _, key in ipairs(keys) do fields[#fields + 1] = string.format('"%s": %s', prefix .. key, json_number(r[prefix .. key])) end
  end
  per_model[#per_model + 1] = string.format('"%s": {%s}', r.model, table.concat(fields, ", "))
end
print("{" .. table.concat(parts, ", ") .. ', "models": {' .. table.concat(per_model, ", ") .. "}}")
