-- vtrun quickstart: train a small model on one device profile, audit it on another (the two
-- Merkle roots are equal bit for bit), then let a trainer poison its data from step 37 and
-- watch the verification game find the interval and the judge decide.
--
--   build/vtrun scripts/examples/quickstart.lua [dir=]
--
-- With dir=, the stores and the game's transcripts stay there (it must be new, empty,
-- or a previous quickstart's); without one they go to a temporary directory removed at the
-- end (they take a few hundred MB).
local game = vt.game
local args = vt.args({dir = ""}, arg)
local keep = args.dir ~= ""
local workdir = keep and args.dir or vt.fs.tmpdir("quickstart")
local marker = workdir .. "/.vtrun-quickstart"
if vt.fs.exists(marker) then
  vt.fs.remove(workdir)  -- a previous quickstart's: ours to replace
elseif vt.fs.exists(workdir) and #vt.fs.list(workdir) > 0 then
  error("quickstart: workdir '" .. workdir .. "' is not empty and not a quickstart's; give a new one", 0)
end
vt.fs.mkdir(workdir)
io.open(marker, "w"):close()

local v = vt.version()
print(string.format("vtrun %s (LibTorch %s, RocksDB %s), %d threads", v.vtrun, v.libtorch, v.rocksdb, vt.threads()))

-- Why this is needed: two device profiles multiply the same FP64 matrices in another order,
-- and most results differ in the last bits.
local m1 = vt.tensor.randn({256, 512}, {seed = 1})
local m2 = vt.tensor.randn({512, 256}, {seed = 2})
local p1 = vt.ops.matmul(m1, m2)
vt.set_profile("splitk4")
local p2 = vt.ops.matmul(m1, m2)
vt.set_profile("native")
print(string.format("one FP64 matmul on profiles 'native' and 'splitk4': %.1f%% of the results differ bitwise",
                    100 * p1:ne(p2):double():mean()))

local data = vt.data.fashion_mnist{limit = 4096}
local spec = vt.spec{
  model = vt.models.mlp{input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10},
  data = data,
  optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
  batch = 64, steps = 60, seed = 1, checkpoint_every = 5,
  round = {bits = 32, band = 1 / 16},  -- a quarter of the paper's window (band 0.25): see below
}
print(spec)

-- 1. An honest trainer on 'native' commits its run; an auditor on 'splitk4' replays it.
local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(workdir .. "/trainer"), profile = "native"}
local t = trainer:run()
print(string.format("\ntrainer on 'native':  %d steps in %.1f s, final loss %.4f, %.2f%% of %d rounded values logged, %.1f MB of logs",
                    t.steps_run, t.seconds, t.loss, 100 * t.logged / t.elements, t.elements, t.log_bytes / 1e6))
local auditor = vt.auditor{spec = spec, data = data, logs = trainer, profile = "splitk4",
                           store = vt.store.open(workdir .. "/auditor")}
local r = auditor:run()
print(string.format("auditor on 'splitk4': %d corrections copied from the log, %d illegitimate entries, %d near misses",
                    r.corrections, r.illegitimate, r.near_misses))
-- The trainer's real room: values it could have rounded either way and still passed these
-- checks, logged or not (docs/ROUNDING.md, "Steerable values").
print(string.format("steerable: %.2f%% of the rounded values (%d logged); under the paper's window it would be every off-grid value",
                    100 * r.steerable / r.elements, r.logged))
print("trainer root: " .. t.root)
print("auditor root: " .. r.root)
if t.root ~= r.root then
  print("ROOTS DIFFER")
  os.exit(1)
end
print("roots equal: the training is replicated bit for bit")

-- 2. The verification game. Each party has its own store and sees the others only through
-- messages; the judge can afford only one interval of 5 steps, on a third profile.
local function play(name, runner)
  local net = game.network{game = name}
  net:add(game.trainer{runner = runner})
  net:add(game.auditor{store = vt.store.open(workdir .. "/" .. name .. "-auditor"), data = data, profile = "splitk4"})
  net:add(game.judge{store = vt.store.open(workdir .. "/" .. name .. "-judge"), data = data, profile = "blocked"})
  local verdict = game.play{network = net, client = game.client{store = vt.store.open(workdir .. "/" .. name .. "-client"), spec = spec}}
  print(game.summary(verdict, net))
  return verdict
end

print("\n== game 1: the honest run")
local honest = play("honest", trainer)

print("\n== game 2: a trainer that changes every label from step 37 on, and commits as if it had not")
local cheat = vt.trainer{spec = spec, data = data, store = vt.store.open(workdir .. "/poisoned"), profile = "native",
                         deviate = {kind = "labels", from_step = 37}}
local c = cheat:run()
print(string.format("poisoned trainer: final loss %.4f, root %s...", c.loss, c.root:sub(1, 16)))
local poisoned = play("poisoned", cheat)
if poisoned.evidence and poisoned.evidence.steps and poisoned.evidence.steps[1] then
  local e = poisoned.evidence.steps[1]
  print(string.format("judge's evidence: step %d, %d illegitimate entries, in %s", e.step, e.illegitimate,
                      table.concat(e.boundaries, ", "):sub(1, 160)))
end
if keep then
  print("transcripts: " .. workdir .. "/poisoned-{client,auditor,judge}")
else
  vt.fs.remove(workdir)
  print("(stores and transcripts removed; pass a workdir to keep them)")
end

local ok = honest.outcome == "accepted" and poisoned.outcome == "trainer_at_fault" and
           poisoned.interval.first_step <= 37 and 37 <= poisoned.interval.last_step
print(ok and "\nquickstart: the honest run was accepted; the poisoned one was caught in steps " ..
             poisoned.interval.first_step .. ".." .. poisoned.interval.last_step
          or "\nquickstart: UNEXPECTED VERDICTS")
os.exit(ok and 0 or 1)
