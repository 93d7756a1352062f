-- Training-step cost of verifiability, measured in one run on this machine:
-- trainer (FP64 + rounding + logging) and auditor (FP64 + replay) against a plain FP64 step
-- and a plain FP32 step of the same model and batch, both vtrun's own engine (mode fp64/fp32)
-- and what a user would otherwise run: the same model in plain LibTorch (ATen's operators,
-- LibTorch's autograd, torch.optim-style updates; vt.torch_baseline). Models: ResNet-18
-- (width 16) on Fashion-MNIST, a 4-layer GPT (d 256) on the Shakespeare corpus, and with
-- models=...,resnet50 ResNet-50 (batch 16), with models=...,gpt2 GPT-2 small (12 layers,
-- d 768, vocab 50257, context 64, batch 8: the paper's model at a short context). The trainer and auditor run twice: with the
-- paper's window (band 1/4, about half of all values logged) and with calibrated windows
-- (vt.calibrate over 2 steps on this profile and one other, untimed).
--
--   vtrun scripts/bench/training.lua [steps=6] [profile=native] [models=resnet18,gpt]
--                                    [windows=paper,calibrated] [drain=auto|on|off] [boundaries=0]
--                                    [baseline=paired|clean]
-- boundaries=N: after each trainer and auditor row, the N boundaries (layer numbers folded:
-- "h.#.mlp.gelu:fwd") that took the most wall time per timed step, from the step reports (a
-- parameter's gradient and optimizer boundaries share one pass: its time, split equally).
-- GPT-2 small needs about 12 GB with windows=paper; calibrating it in one process (two
-- profiles' runs and every boundary's values of a step) needs more than 24 GB.
-- Each of vtrun's FP64 runners (plain, trainer, auditor) steps in turn with the LibTorch FP64
-- baseline, one step each, and every ratio to it is of medians over the same stretch of time.
-- "torch64 s" is the median of the baseline's medians over the model's arms so far; "tr/t64"
-- and "au/t64" divide by the baseline's median beside that runner. "tr cpu s" is the
-- trainer's CPU time per step over all threads (a trainer encodes its records and writes its
-- store on background threads; VTRUN_BACKGROUND=off or idle changes that, API.md).
-- baseline=clean: each runner's ratios also against the baseline's step after vtrun's plain
-- FP64 step (below, where `clean_baseline` is set); the plain FP64 runner then stays in memory
-- beside each trainer and auditor (GPT-2 small: about 4 GB more).
-- Last line: one JSON object with trainer_over_torch_fp64, auditor_over_torch_fp64,
-- trainer_over_fp64, auditor_over_fp64, fp64_over_torch_fp64, log_bytes_per_step (paper
-- window; the worst model) and the same with the prefix calibrated_, the rounding kernels'
-- ratio_to_memcpy, round_log_calibrated_ratio and replay_ratio, then per model.
local a = vt.args({steps = 6, profile = "native", models = "resnet18,gpt", windows = "paper,calibrated", drain = "auto",
                   boundaries = 0, baseline = "paired"}, arg)
if not (a.boundaries >= 0 and a.boundaries == math.floor(a.boundaries)) then
  error("bench/training: boundaries must be an integer >= 0, got " .. tostring(a.boundaries), 0)
end
local steps, profile = a.steps, a.profile
if not (steps >= 1 and steps == math.floor(steps)) then
  error("bench/training: steps must be an integer >= 1, got " .. tostring(a.steps), 0)
end
do  -- the profile is checked before anything is timed
  local names, chosen = {}, nil
  for _, p in ipairs(vt.profiles()) do
    names[#names + 1] = p.name
    if p.name == profile then chosen = p end
  end
  if chosen == nil then
    error("bench/training: unknown profile '" .. profile .. "' (valid: " .. table.concat(names, ", ") .. ")", 0)
  end
  if not chosen.available then
    error("bench/training: profile '" .. profile .. "' is not available here: " .. tostring(chosen.unavailable), 0)
  end
end
-- A trainer or auditor writes each step into its store on a background thread while the next
-- step computes. Paired with the baseline, that "next step" is LibTorch's: with no idle CPU
-- (LibTorch's threads as many as the CPUs), the write slowed the baseline's step instead of
-- the runner's (ResNet-50 on 2 threads: LibTorch's step 1.49-1.52 s beside the paper window's
-- runners, 1.34-1.36 s beside the calibrated ones, whose logs are 1000x smaller). Draining
-- waits for the write after each runner step and counts the wait as the runner's. With an idle
-- CPU the write runs there during a real run's next step, so "auto" drains only without one.
if a.drain ~= "auto" and a.drain ~= "on" and a.drain ~= "off" then
  error("bench/training: drain must be auto, on or off, got '" .. tostring(a.drain) .. "'", 0)
end
local drain = a.drain == "on" or (a.drain == "auto" and vt.threads() >= vt.cpus())
-- The baseline's step after a runner's is slowed by what the runner's step leaves behind (a
-- paper-window trainer's 6.5 MB of records a step and its store's memtable on GPT 4x256:
-- LibTorch's next step 2.5-9% slower than after vtrun's plain FP64 step, in three runs; a
-- calibrated trainer's: 0-1%), which flatters the runner's ratio: in a run of its own that
-- cost lands on its own next step. baseline=clean steps vtrun's plain FP64 runner and the
-- baseline once more after each pair and divides by that baseline step's median instead
-- (columns "tr/t64c", "au/t64c"; JSON keys *_over_torch_fp64_clean): the baseline after a
-- step like its own.
if a.baseline ~= "paired" and a.baseline ~= "clean" then
  error("bench/training: baseline must be paired or clean, got '" .. tostring(a.baseline) .. "'", 0)
end
local clean_baseline = a.baseline == "clean"
io.stdout:setvbuf("line")  -- long runs (GPT-2 small) show each row as it is measured
local corpus = vt.corpus

local workdir = vt.fs.tmpdir("bench-training")

local clock = vt.clock

local catalog = {
  resnet18 = {
    name = "resnet18-w16",
    data = function() return vt.data.fashion_mnist{limit = 8192} end,
    model = vt.models.resnet{depth = 18, width = 16, in_channels = 1, classes = 10},
    optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
    batch = 64,
  },
  gpt = {
    name = "gpt-4x256",
    data = function() return vt.data.text{path = corpus, context = 64} end,
    model = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64},
    optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01},
    batch = 8,
  },
  gpt2 = {
    name = "gpt2-small",
    data = function() return vt.data.text{path = corpus, context = 64} end,
    model = vt.models.gpt2{layers = 12, d_model = 768, heads = 12, vocab = 50257, context = 64},
    optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01},
    batch = 8,
    calibration_passes = 2,  -- the update-kind boundaries in a second run: less memory
  },
  resnet50 = {
    name = "resnet50",
    data = function() return vt.data.fashion_mnist{limit = 2048} end,
    model = vt.models.resnet{depth = 50, width = 64, in_channels = 1, classes = 10},
    optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
    batch = 16,
  },
}
local windows = {}
for w in a.windows:gmatch("[^,]+") do
  if w ~= "paper" and w ~= "calibrated" then
    error("bench/training: unknown window '" .. w .. "' (valid: paper, calibrated)", 0)
  end
  for _, seen in ipairs(windows) do
    if seen == w then error("bench/training: windows names '" .. w .. "' twice", 0) end
  end
  windows[#windows + 1] = w
end
if #windows == 0 then
  error("bench/training: windows must name at least one of paper, calibrated, got '" .. a.windows .. "'", 0)
end
local models = {}
for name in a.models:gmatch("[^,]+") do
  local m = catalog[name]
  if m == nil then error("bench/training: unknown model '" .. name .. "' (valid: resnet18, gpt, gpt2, resnet50)", 0) end
  if m.loaded then error("bench/training: models names '" .. name .. "' twice", 0) end
  m.data, m.loaded = m.data(), true
  models[#models + 1] = m
end
if #models == 0 then
  error("bench/training: models must name at least one of resnet18, gpt, gpt2, resnet50, got '" .. a.models .. "'", 0)
end

local function median(t)
  local c = {}
  for i, v in ipairs(t) do c[i] = v end
  table.sort(c)
  local n = #c
  return n % 2 == 1 and c[(n + 1) / 2] or (c[n / 2] + c[n / 2 + 1]) / 2
end

-- Seconds per step of `runner` (median over `steps` steps after two warm-up steps) and its
-- log bytes, logged entries and rounded values per step (means). With `torch64`, the
-- LibTorch FP64 baseline takes a step after each of the runner's, and its median is returned
-- too: each ratio is measured over the same stretch of time, so a drift in the machine's
-- speed (other load, clock frequency) moves both sides. CPU seconds (all threads) per step
-- of the runner, from os.clock: above its wall time when a background thread helps (a
-- trainer encodes its records and writes its store beside the step).
local warmup = 2  -- steps before timing (vtrun's FP64 GPT-2 small touches 1.3 GB more memory in its second)
local function time_steps(runner, torch64, store, clean)
  for _ = 1, warmup do
    runner:step()
    if torch64 then torch64:step() end
    if clean then
      clean:step()
      torch64:step()
    end
  end
  local own, base, base_clean = {}, {}, {}
  local bytes, logged, elements, cpu = 0, 0, 0, 0
  local groups = {}  -- boundary name with its layer numbers folded -> summed statistics
  for i = 1, steps do
    local c0, t0 = os.clock(), clock()
    local r = runner:step()
    if drain and store then store:runs() end  -- any call on the store waits for the step's write
    own[i] = clock() - t0
    cpu = cpu + os.clock() - c0
    if type(r) == "table" and r.log_bytes ~= nil then
      bytes, logged, elements = bytes + r.log_bytes, logged + r.logged, elements + r.elements
    end
    if type(r) == "table" and r.boundaries ~= nil then
      for name, b in pairs(r.boundaries) do
        local key = name:gsub("%d+", "#")
        local g = groups[key] or {calls = 0, elements = 0, logged = 0, seconds = 0}
        groups[key] = g
        g.calls, g.elements = g.calls + b.calls, g.elements + b.elements
        g.logged, g.seconds = g.logged + b.logged, g.seconds + b.seconds
      end
    end
    if torch64 then
      t0 = clock()
      torch64:step()
      base[i] = clock() - t0
    end
    if clean then  -- the baseline again, after vtrun's plain FP64 step
      clean:step()
      t0 = clock()
      torch64:step()
      base_clean[i] = clock() - t0
    end
  end
  return {s = median(own), torch64_s = torch64 and median(base), torch64_clean_s = clean and median(base_clean),
          cpu_s = cpu / steps, bytes = bytes / steps,
          logged = logged / steps, elements = elements / steps, groups = groups}
end

-- The `a.boundaries` boundary groups of a runner with the most seconds, per timed step.
local function print_boundaries(role, t)
  if a.boundaries == 0 then return end
  local list, total = {}, 0
  for name, g in pairs(t.groups) do
    list[#list + 1] = {name = name, g = g}
    total = total + g.seconds
  end
  table.sort(list, function(x, y) return x.g.seconds > y.g.seconds end)
  print(string.format("  %s: %.1f ms a step at %d boundary groups; the %d slowest:", role, 1e3 * total / steps,
                      #list, math.min(a.boundaries, #list)))
  print(string.format("    %-40s %8s %12s %9s %9s %9s", "boundary", "calls", "values", "ms", "ns/value", "logged %"))
  for i = 1, math.min(a.boundaries, #list) do
    local e = list[i]
    local g = e.g
    print(string.format("    %-40s %8.0f %12.0f %9.2f %9.2f %8.2f%%", e.name, g.calls / steps, g.elements / steps,
                        1e3 * g.seconds / steps, 1e9 * g.seconds / math.max(g.elements, 1),
                        100 * g.logged / math.max(g.elements, 1)))
  end
end

-- Windows: the paper's (band 1/4) and calibrated ones, measured by vt.calibrate over the
-- first steps on `profile` and a second in-process profile (not timed).
local function calibrated_round(spec, data, passes)
  local other = profile == "splitk4" and "native" or "splitk4"
  return vt.calibrate{spec = spec, data = data, profiles = {profile, other}, steps = 2, passes = passes or 1}.round
end

local results = {}
print(string.format("%d timed steps per arm after %d warm-up steps, profile %s, %d threads, store writes %s", steps,
                    warmup, profile, vt.threads(),
                    drain and "drained after each step (counted as the runner's)" or "left to overlap"))
print(string.format("%-14s %-10s %9s %9s %9s %9s %9s %9s %8s %8s %8s %8s %9s %12s %10s%s", "model", "window",
                    "torch32 s", "torch64 s", "fp32 s", "fp64 s", "trainer s", "auditor s", "tr/t64", "au/t64",
                    "tr/fp64", "au/fp64", "tr cpu s", "log B/step", "logged %",
                    clean_baseline and string.format(" %8s %8s", "tr/t64c", "au/t64c") or ""))
for _, m in ipairs(models) do
  -- The run is longer than the warm-up and the timed steps, so no checkpoint falls in the
  -- timed window (checkpoint hashing is measured by scripts/bench/store.lua).
  local function make_spec(round)
    return vt.spec{model = m.model, data = m.data, optim = m.optim, batch = m.batch, steps = steps + warmup + 1,
                   seed = 1, checkpoint_every = steps + warmup + 1, round = round}
  end
  local spec = make_spec(nil)
  local function plain(mode, plain_spec)
    return vt.trainer{spec = plain_spec or spec, data = m.data, mode = mode, profile = profile}
  end
  local torch32 = time_steps(vt.torch_baseline{spec = spec, data = m.data, dtype = "float32"}).s
  collectgarbage("collect")
  local fp32 = time_steps(plain("fp32")).s
  collectgarbage("collect")
  -- Each runner holds the model's state (GPT-2 small: about 4 GB in FP64 with AdamW's),
  -- which Lua's collector does not see: collect it before the next arm. The LibTorch FP64
  -- baseline stays for the model's arms, stepping in turn with each.
  local torch = vt.torch_baseline{spec = spec, data = m.data, dtype = "float64"}
  -- (Its run: long enough to step with every arm, with no checkpoint.)
  local clean_steps = (steps + warmup) * (1 + 2 * #windows) + 1
  local fp64_runner = plain("fp64", clean_baseline and vt.spec{model = m.model, data = m.data, optim = m.optim,
                                                               batch = m.batch, steps = clean_steps, seed = 1,
                                                               checkpoint_every = clean_steps} or nil)
  local fp64_t = time_steps(fp64_runner, torch)
  -- baseline=clean: the plain FP64 runner stays, stepping after each pair of the arms.
  local clean = clean_baseline and fp64_runner or nil
  fp64_runner = nil
  collectgarbage("collect")
  local fp64 = fp64_t.s
  local torch64_all = {fp64_t.torch64_s}  -- the baseline's medians, one per arm
  local row = {model = m.name, fp32_s = fp32, fp64_s = fp64, torch_fp32_s = torch32,
               fp64_over_torch_fp64 = fp64 / fp64_t.torch64_s, fp32_over_torch_fp32 = fp32 / torch32}
  for _, window in ipairs(windows) do
    local wspec = window == "paper" and spec or make_spec(calibrated_round(spec, m.data, m.calibration_passes))
    local dir = workdir .. "/" .. m.name .. "-" .. window
    local trainer_store = vt.store.open(dir .. "-t")
    local trainer = vt.trainer{spec = wspec, data = m.data, profile = profile, store = trainer_store}
    local t = time_steps(trainer, torch, trainer_store, clean)
    local auditor_store = vt.store.open(dir .. "-a")
    local auditor = vt.auditor{spec = wspec, data = m.data, logs = trainer, profile = profile,
                               store = auditor_store}
    trainer = nil  -- the auditor keeps the trainer's store; the model's memory can go
    collectgarbage("collect")
    local a = time_steps(auditor, torch, auditor_store, clean)
    local tr, au = t.s, a.s
    local prefix = window == "paper" and "" or "calibrated_"
    row[prefix .. "trainer_over_torch_fp64"] = tr / t.torch64_s
    row[prefix .. "auditor_over_torch_fp64"] = au / a.torch64_s
    if clean then
      row[prefix .. "trainer_over_torch_fp64_clean"] = tr / t.torch64_clean_s
      row[prefix .. "auditor_over_torch_fp64_clean"] = au / a.torch64_clean_s
    end
    row[prefix .. "trainer_over_fp64"] = tr / fp64
    row[prefix .. "auditor_over_fp64"] = au / fp64
    row[prefix .. "trainer_over_fp32"] = tr / fp32
    row[prefix .. "trainer_cpu_s"] = t.cpu_s
    row[prefix .. "log_bytes_per_step"] = t.bytes
    row[prefix .. "logged_fraction"] = t.logged / t.elements
    row.rounded_per_step = t.elements
    torch64_all[#torch64_all + 1] = t.torch64_s
    torch64_all[#torch64_all + 1] = a.torch64_s
    print(string.format("%-14s %-10s %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f %8.2f %8.2f %8.2f %8.2f %9.3f %12.0f %9.4f%%%s",
                        m.name, window, torch32, median(torch64_all), fp32, fp64, tr, au, tr / t.torch64_s,
                        au / a.torch64_s, tr / fp64, au / fp64, t.cpu_s, t.bytes, 100 * t.logged / t.elements,
                        clean and string.format(" %8.2f %8.2f", tr / t.torch64_clean_s, au / a.torch64_clean_s)
                          or ""))
    print_boundaries("trainer", t)
    print_boundaries("auditor", a)
    auditor = nil
    collectgarbage("collect")
  end
  row.torch_fp64_s = median(torch64_all)
  torch, clean = nil, nil
  collectgarbage("collect")
  results[#results + 1] = row
end
vt.fs.remove(workdir)

-- The rounding kernels against memcpy in this process (4M values, best of 3, its threads;
-- scripts/bench/rounding.lua measures them at length): round + classify + log with the
-- paper's window and a calibrated-like one, and replay, each over memcpy of the same bytes.
local rounding = vt.bench_rounding{elements = 2 ^ 22, repeats = 3, threads = {vt.threads()}, bits = {32},
                                   alpha = 2 ^ -44}
local function kernel_speed(what, mode)
  for _, k in ipairs(rounding.kernels) do
    if k.what == what and k.mode == mode then return k.elems_per_s end
  end
end
local memcpy_speed = kernel_speed("memcpy", "")
local rounding_ratios = {ratio_to_memcpy = kernel_speed("round_log", "paper") / memcpy_speed,
                         round_log_calibrated_ratio = kernel_speed("round_log", "calibrated") / memcpy_speed,
                         replay_ratio = kernel_speed("replay", "paper") / memcpy_speed}
print(string.format("rounding kernels (%s) over memcpy: round_log %.2f, calibrated %.2f, replay %.2f", rounding.isa,
                    rounding_ratios.ratio_to_memcpy, rounding_ratios.round_log_calibrated_ratio,
                    rounding_ratios.replay_ratio))

local function json_number(v) return string.format("%.6g", v) end
local keys = {"trainer_over_torch_fp64", "auditor_over_torch_fp64", "trainer_over_fp64", "auditor_over_fp64",
              "trainer_over_fp32", "trainer_cpu_s", "log_bytes_per_step", "logged_fraction",
              "trainer_over_torch_fp64_clean", "auditor_over_torch_fp64_clean"}
local parts = {}
local function worst_of(key)
  local worst
  for _, r in ipairs(results) do
    if r[key] ~= nil then worst = math.max(worst or r[key], r[key]) end
  end
  if worst ~= nil then parts[#parts + 1] = string.format('"%s": %s', key, json_number(worst)) end
end
worst_of("fp64_over_torch_fp64")
for _, prefix in ipairs({"", "calibrated_"}) do
  for _, key in ipairs({"trainer_over_torch_fp64", "auditor_over_torch_fp64", "trainer_over_fp64", "auditor_over_fp64",
                        "log_bytes_per_step", "trainer_over_torch_fp64_clean", "auditor_over_torch_fp64_clean"}) do
    worst_of(prefix .. key)
  end
end
for _, key in ipairs({"ratio_to_memcpy", "round_log_calibrated_ratio", "replay_ratio"}) do
  parts[#parts + 1] = string.format('"%s": %s', key, json_number(rounding_ratios[key]))
end
local per_model = {}
for _, r in ipairs(results) do
  local fields = {}
  for _, key in ipairs({"torch_fp32_s", "torch_fp64_s", "fp32_s", "fp64_s", "fp64_over_torch_fp64", "fp32_over_torch_fp32"}) do
    fields[#fields + 1] = string.format('"%s": %s', key, json_number(r[key]))
  end
  for _, prefix in ipairs({"", "calibrated_"}) do
    for _, key in ipairs(keys) do
      if r[prefix .. key] ~= nil then
        fields[#fields + 1] = string.format('"%s": %s', prefix .. key, json_number(r[prefix .. key]))
      end
    end
  end
  per_model[#per_model + 1] = string.format('"%s": {%s}', r.model, table.concat(fields, ", "))
end
print("{" .. table.concat(parts, ", ") .. ', "models": {' .. table.concat(per_model, ", ") .. "}}")
