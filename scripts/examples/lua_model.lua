-- A model of your own, verified: a small CNN written in Lua with vt.nn, trained on
-- Fashion-MNIST, audited on every ordered pair of three device profiles (native and splitk4
-- in this process, scalar in a process of its own that knows the model only from the spec's
-- text), then the verification game on an honest run and on one that poisons its labels.
--
--   build/vtrun scripts/examples/lua_model.lua [steps=40] [width=8] [dir=]
--
-- The model is scripts/vt/models/cnn.lua (vt.nn.models_dir); model=FILE trains another
-- vt.nn source that takes 28x28 images and gives 10 class scores. With dir=, the stores stay
-- there; without one they go to a temporary directory removed at the end.
--
-- Worker roles (how this script runs itself under a process-level profile):
--   vtrun --profile scalar lua_model.lua role=train spec=FILE store=DIR
--   vtrun --profile scalar lua_model.lua role=audit spec=FILE logs=DIR run=ID store=DIR
-- each print one JSON line {"root":..., "illegitimate":..., "corrections":...}.
local game = vt.game
local a = vt.args({steps = 40, width = 8, dir = "", model = "", role = "all", spec = "", store = "",
                   logs = "", run = "", limit = 2048}, arg)
local data = vt.data.fashion_mnist{limit = a.limit}

local function read(path)
  local f = assert(io.open(path, "rb"))
  local text = f:read("*a")
  f:close()
  return text
end

-- Worker roles: everything comes from the spec's text.
if a.role == "train" or a.role == "audit" then
  local spec = vt.spec.parse(read(a.spec))
  local runner
  if a.role == "train" then
    runner = vt.trainer{spec = spec, data = data, store = vt.store.open(a.store)}
  else
    runner = vt.auditor{spec = spec, data = data, logs = vt.store.open(a.logs, {read_only = true}),
                        logs_run = a.run, store = vt.store.open(a.store)}
  end
  local r = runner:run{progress = false}
  print(vt.json.encode{root = r.root, run = runner:run_id(), illegitimate = r.illegitimate or 0,
                       corrections = r.corrections or 0})
  os.exit(0)
end
if a.role ~= "all" then error("lua_model: role must be all, train or audit, got '" .. a.role .. "'", 0) end

local keep = a.dir ~= ""
local workdir = keep and a.dir or vt.fs.tmpdir("lua-model")
if vt.fs.exists(workdir) and #vt.fs.list(workdir) > 0 then
  error("lua_model: dir '" .. workdir .. "' is not empty; give a new one", 0)
end
vt.fs.mkdir(workdir)

-- 1. The model: a Lua source. vt.nn.model runs it (in a sandbox) and the spec holds it.
local model = vt.nn.model{file = a.model ~= "" and a.model or (vt.nn.models_dir .. "cnn.lua"),
                          args = {width = a.width}}
print(model)
print(string.format("%d parameters", model.module:parameter_count()))
local spec = vt.spec{model = model, data = data, optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
                     batch = 32, steps = a.steps, seed = 1, checkpoint_every = 5,
                     round = {bits = 32, band = 0.25}}
print(spec)
local spec_file = workdir .. "/spec.txt"
local out = assert(io.open(spec_file, "wb"))
out:write(spec:canonical())
out:close()

-- A run on a process-level profile: this script again, as a worker.
local function worker(profile, args)
  local argv = {vt.executable(), "--profile", profile, debug.getinfo(1, "S").source:sub(2)}
  for _, x in ipairs(args) do argv[#argv + 1] = x end
  local child = vt.process.spawn(argv)
  local lines = {}
  while true do
    local line = child:receive(3600)
    if not line then break end
    lines[#lines + 1] = line
  end
  local status = child:wait()
  local ok, result = pcall(vt.json.decode, lines[#lines] or "")
  if status ~= 0 or not ok or not result.root then
    error("lua_model: the " .. profile .. " worker failed: " .. table.concat(lines, "\n"), 0)
  end
  return result
end

-- 2. A trainer on each profile; an auditor on each other profile replays its logs.
local in_process = {native = true, splitk4 = true}
local profiles = {"native", "splitk4", "scalar"}
local trainers = {}
for _, p in ipairs(profiles) do
  local dir = workdir .. "/train-" .. p
  if in_process[p] then
    local t = vt.trainer{spec = spec, data = data, store = vt.store.open(dir), profile = p}
    local r = t:run{progress = false}
    trainers[p] = {root = r.root, run = t:run_id(), dir = dir, runner = t, loss = r.loss}
    t:store():flush()
    print(string.format("trainer %-8s root %s  loss %.4f  %.4f%% of values logged", p, r.root:sub(1, 16),
                        r.loss, 100 * r.logged / r.elements))
  else
    local r = worker(p, {"role=train", "spec=" .. spec_file, "store=" .. dir})
    trainers[p] = {root = r.root, run = r.run, dir = dir}
    print(string.format("trainer %-8s root %s  (process of its own)", p, r.root:sub(1, 16)))
  end
end

local failures = 0
for _, p in ipairs(profiles) do
  for _, q in ipairs(profiles) do
    if p ~= q then
      local t = trainers[p]
      local dir = workdir .. "/audit-" .. q .. "-of-" .. p
      local r
      if in_process[q] then
        local auditor = vt.auditor{spec = spec, data = data, logs = vt.store.open(t.dir, {read_only = true}),
                                   logs_run = t.run, store = vt.store.open(dir), profile = q}
        r = auditor:run{progress = false}
      else
        r = worker(q, {"role=audit", "spec=" .. spec_file, "logs=" .. t.dir, "run=" .. t.run, "store=" .. dir})
      end
      local equal = r.root == t.root and r.illegitimate == 0
      if not equal then failures = failures + 1 end
      print(string.format("auditor %-8s of trainer %-8s %s  corrections %d  illegitimate %d", q, p,
                          r.root == t.root and "equal root" or "ROOT DIFFERS", r.corrections, r.illegitimate))
    end
  end
end
-- Control: without logs, the profiles' runs differ.
print(string.format("without logs: native and splitk4 roots %s", trainers.native.root == trainers.splitk4.root
                    and "EQUAL (the control failed)" or "differ"))
if trainers.native.root == trainers.splitk4.root then failures = failures + 1 end

-- 3. The game: the honest run is accepted; labels poisoned from step 21 are caught.
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
local honest = play("honest", trainers.native.runner)
print("\n== game 2: labels poisoned from step 21")
local from = math.min(21, a.steps)
local cheat = vt.trainer{spec = spec, data = data, store = vt.store.open(workdir .. "/poisoned"),
                         deviate = {kind = "labels", from_step = from}}
cheat:run{progress = false}
local poisoned = play("poisoned", cheat)

local ok = failures == 0 and honest.outcome == "accepted" and poisoned.outcome == "trainer_at_fault" and
           poisoned.interval.first_step <= from and from <= poisoned.interval.last_step
if not keep then vt.fs.remove(workdir) end
print(ok and "\nlua_model: every ordered pair replayed to equal roots; the honest run was accepted and " ..
             "the poisoned one caught in steps " .. poisoned.interval.first_step .. ".." .. poisoned.interval.last_step
          or "\nlua_model: UNEXPECTED RESULTS")
os.exit(ok and 0 or 1)
