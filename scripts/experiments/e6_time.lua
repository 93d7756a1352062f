-- E6 (paper Table 5): time per training step of plain FP32, plain FP64, the trainer (FP64,
-- rounding, logging, commits) and the auditor (replay), with a checkpoint hashed and stored
-- every k = 5 steps, and the checkpointing cost on its own; the trainer's and auditor's steps
-- that end in a checkpoint (a leaf) are also timed apart from the others.
--
--   vtrun scripts/experiments/e6_time.lua [models=resnet,gpt] [steps=10] [profile=native] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({models = "resnet,gpt", steps = 10, profile = "native", out = ""}, arg)
local out = lib.outdir("e6_time", a.out)

-- Mean seconds per step over n timed steps after a warm-up, and the means of the steps that
-- end in a checkpoint (step a multiple of k) and of the others.
local function per_step(runner, n, k)
  runner:step()  -- warm-up
  local total, at_leaf, leaf_steps, other, other_steps = 0, 0, 0, 0, 0
  for _ = 1, n do
    local t0 = vt.clock()
    local r = runner:step()
    local dt = vt.clock() - t0
    total = total + dt
    if k and r.step % k == 0 then
      at_leaf, leaf_steps = at_leaf + dt, leaf_steps + 1
    else
      other, other_steps = other + dt, other_steps + 1
    end
  end
  return total / n, leaf_steps > 0 and at_leaf / leaf_steps or 0, other_steps > 0 and other / other_steps or 0
end

local header = {"model", "fp32 s", "fp64 s", "trainer s (k=5)", "auditor s (k=5)", "trainer/fp64", "auditor/fp64",
                "trainer/fp32", "checkpoint s", "checkpoint share of trainer", "trainer s, leaf steps",
                "trainer s, other steps", "auditor s, leaf steps", "auditor s, other steps"}
local rows, results = {}, {}
for model in a.models:gmatch("[^,]+") do
  local s = lib.setup(model)
  local tmp = lib.tmpdir()
  local n = a.steps
  local spec = lib.spec(s, n + 1, {bits = 32, band = 0.25}, {checkpoint_every = 5})
  local fp32 = per_step(vt.trainer{spec = spec, data = s.data, mode = "fp32", profile = a.profile}, n)
  local fp64 = per_step(vt.trainer{spec = spec, data = s.data, mode = "fp64", profile = a.profile}, n)
  local t = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/t"), profile = a.profile}
  local trainer, trainer_leaf, trainer_other = per_step(t, n, 5)
  local u = vt.auditor{spec = spec, data = s.data, logs = t, store = vt.store.open(tmp .. "/u"), profile = a.profile}
  local auditor, auditor_leaf, auditor_other = per_step(u, n, 5)
  -- Checkpointing alone: canonical encoding, SHA-256 and one store batch, as at every leaf.
  local store = vt.store.open(tmp .. "/c")
  local run = store:create_run("c", {spec = spec:canonical(), checkpoint_every = 1, steps = 6})
  local bytes = t:checkpoint()
  run:put_checkpoint(0, bytes)
  local t0 = vt.clock()
  for i = 1, 5 do
    run:write_step(i, {})
    run:put_checkpoint(i, bytes)
  end
  local checkpoint = (vt.clock() - t0) / 5
  rows[#rows + 1] = {model, fp32, fp64, trainer, auditor, trainer / fp64, auditor / fp64, trainer / fp32, checkpoint,
                     (checkpoint / 5) / trainer, trainer_leaf, trainer_other, auditor_leaf, auditor_other}
  results[model] = {trainer_over_fp64 = trainer / fp64, auditor_over_fp64 = auditor / fp64, checkpoint_bytes = #bytes}
  vt.fs.remove(tmp)
end
print("machine: " .. lib.machine())
print(string.format("E6: seconds per step (%d timed steps after a warm-up), profile %s, %d threads", a.steps, a.profile, vt.threads()))
lib.table(header, rows)
lib.csv(out .. "/e6_time.csv", header, rows)
print(vt.json.encode{experiment = "E6", results = results})
