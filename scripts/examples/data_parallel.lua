-- Data-parallel training with vtrun: every rank computes its shards of each batch, c10d/Gloo
-- sums the gradients, and the sum passes a rounding boundary with logging, so the run has one
-- Merkle root however many processes computed it. Then the run is audited in another shape.
--
--   build/vtrun --nproc 2 scripts/examples/data_parallel.lua [model=mlp|gpt] [steps=100] [shards=4]
--                  [profiles=native,splitk4,blocked] [dir=] [role=all|train|audit] [deviate=KIND from_step=S]
--   build/vtrun [--profile P] scripts/examples/data_parallel.lua role=audit dir=D [profile=blocked|P]
--
-- role=all (default) trains with the group (rank r on profiles[r+1], cycling) into dir/trainer,
-- then audits with the same group on shifted profiles (rank r on profiles[r+2]) into
-- dir/auditor-w<world>; rank 0 prints both roots and fails unless they are equal. role=train
-- only trains (run it again after a crash: it resumes from the last checkpoint). role=audit
-- replays dir/trainer alone (or with any group whose size divides shards) into
-- dir/audit-w<world>-<profile> and compares roots. Across hosts, start one `vtrun --world N
-- --rank R --rendezvous tcp://HOST0:PORT` per host instead of --nproc (README, "Data
-- parallelism"); dir must then be a path every host has (only rank 0 writes there).
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "../experiments/lib.lua")
local a = vt.args({model = "mlp", steps = 100, shards = 4, profiles = {"native", "splitk4", "blocked"},
                   profile = "blocked", dir = "", role = "all", checkpoint_every = 10, deviate = "", from_step = 1}, arg)
local world, rank = vt.dist.world(), vt.dist.rank()
if a.role ~= "all" and a.role ~= "train" and a.role ~= "audit" then
  error("data_parallel: role must be all, train or audit, got '" .. a.role .. "'", 0)
end
if a.role == "audit" and a.dir == "" then error("data_parallel: role=audit needs dir= (the trainer's directory)", 0) end

local function say(...)
  if rank == 0 then print(string.format(...)) end
end

-- Rank 0 picks the directory when none is given; every rank learns it.
local dir = a.dir
if dir == "" then dir = vt.dist.broadcast(rank == 0 and vt.fs.tmpdir("data-parallel") or nil) end
if rank == 0 then vt.fs.mkdir(dir) end

local s = lib.setup(a.model)
-- The paper's window: band-only windows narrower than it can flag honest entries of
-- products that cancel (docs/THREAT_MODEL.md, "Residual gaps").
local spec = lib.spec(s, a.steps, {bits = 32, band = 0.25}, {shards = a.shards, checkpoint_every = a.checkpoint_every})
local function on(list, i) return list[(i % #list) + 1] end
local function store(name) return rank == 0 and vt.store.open(dir .. "/" .. name) or nil end

say("%s, %d shards of %d examples, %d steps, on %d process%s; spec %s", a.model, a.shards, s.batch / a.shards,
    a.steps, world, world == 1 and "" or "es", spec:hash():sub(1, 16))

local trainer_root
if a.role ~= "audit" then
  local profile = on(a.profiles, rank)
  -- deviate=KIND: a dishonest trainer (the game's scenarios, docs/api/game.md) from from_step on.
  local deviate = a.deviate ~= "" and {kind = a.deviate, from_step = a.from_step} or nil
  local trainer = vt.trainer{spec = spec, data = s.data, store = store("trainer"), profile = profile, deviate = deviate}
  local sent0 = vt.dist.bytes_sent()
  local t = trainer:run()
  trainer_root = t.root
  -- Bytes every rank put on the wire (gradient all-reduce, records to rank 0, buffers).
  local sent = vt.dist.gather(tostring(vt.dist.bytes_sent() - sent0))
  local total = 0
  for _, b in ipairs(sent or {}) do total = total + tonumber(b) end
  local n = math.max(t.steps_run, 1)
  say("trainer (ranks on %s): %d steps in %.1f s (%.4f s/step), loss %.4f, %.3f%% of %d values logged, %.1f KB of logs/step, ranks sent %.1f KB/step",
      table.concat(a.profiles, ","), t.steps_run, t.seconds, t.seconds / n, t.loss, 100 * t.logged / math.max(t.elements, 1),
      t.elements, t.log_bytes / 1e3 / n, total / 1e3 / n)
  say("trainer root: %s", t.root)
end

if a.role == "train" then return end

local logs = rank == 0 and vt.store.open(dir .. "/trainer", {read_only = true}) or nil
if trainer_root == nil and rank == 0 then trainer_root = logs:run("run"):root() end
local profile = a.role == "audit" and world == 1 and a.profile or on(a.profiles, rank + 1)
local name = a.role == "audit" and string.format("audit-w%d-%s", world, profile) or string.format("auditor-w%d", world)
local auditor = vt.auditor{spec = spec, data = s.data, logs = logs, store = store(name), profile = profile}
local r = auditor:run()
say("auditor (%d process%s, rank 0 on %s): %d corrections, %d illegitimate entries, %d log mismatches, %d steerable",
    world, world == 1 and "" or "es", profile, r.corrections, r.illegitimate, r.log_mismatches or 0, r.steerable)
say("auditor root: %s", r.root)
if rank == 0 then
  if r.root ~= trainer_root then
    print("ROOTS DIFFER")
    os.exit(1)
  end
  print("roots equal")
end
