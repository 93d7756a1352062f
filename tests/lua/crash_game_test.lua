-- Crash safety of every party (issue 19), with SIGKILL at random moments, not only between
-- steps:
--  - a trainer process is killed while it trains (inside steps, while it writes) and resumed
--    until it finishes: its root is the uninterrupted run's;
--  - in the game, a trainer, auditor or judge process is killed at a random moment of a
--    game (three times each). The game ends with the verdict of the uninterrupted game or with that party's
--    forfeit, never blaming another one; the party's store opens, verifies, still holds the
--    run and transcripts it held, and what it was writing (the auditor's replay) is a prefix
--    of the uninterrupted replay; restarted on the same store, the party plays the game
--    again to the uninterrupted game's verdict.
-- The seed of the kill moments is printed (VT_TEST_SEED replays it).
local T = require "vt.test"
local game = require "vt.game"
local party = dofile("crash_party.lua")

local seed = tonumber(os.getenv("VT_TEST_SEED") or "") or os.time()
print("crash_game_test: seed " .. seed .. " (set VT_TEST_SEED to replay)")
math.randomseed(seed)

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")

local PROFILES = {trainer = "native", auditor = "splitk4", judge = "blocked"}
local games = 0

local function sleep(seconds)
  os.execute(string.format("sleep %.3f", seconds))
end

-- One game. `remote_role` (optional) runs in its own process; the other parties run here.
-- `kill_after` (seconds, optional): that process gets SIGKILL this long after the game starts.
local function play(trainer_dir, auditor_dir, judge_dir, remote_role, kill_after)
  games = games + 1
  local net = game.network{game = "game-" .. games}
  local stores, remote = {}, nil
  local function local_store(dir)
    local s = vt.store.open(dir)
    stores[#stores + 1] = s
    return s
  end
  local dirs = {trainer = trainer_dir, auditor = auditor_dir, judge = judge_dir}
  for _, role in ipairs{"trainer", "auditor", "judge"} do
    if role == remote_role then
      remote = game.remote{role = role, profile = PROFILES[role],
                           options = {store = dirs[role], run = "run", data = party.recipe}}
      net:add(remote)
    elseif role == "trainer" then
      net:add(game.trainer{store = local_store(trainer_dir), run = "run"})
    else
      net:add(game[role]{store = local_store(dirs[role]), data = party.data, profile = PROFILES[role]})
    end
  end
  local client = game.client{store = local_store(tmp .. "/client"), spec = party.spec}
  local t0 = vt.clock()
  if kill_after then
    os.execute(string.format("(sleep %.3f; kill -9 %d) >/dev/null 2>&1 &", kill_after, remote.pid))
  end
  local verdict = game.play{network = net, client = client}
  local seconds = vt.clock() - t0
  if kill_after then
    -- Let the killer fire (or find the process gone) before the process is reaped.
    local left = kill_after - (vt.clock() - t0) + 0.05
    if left > 0 then sleep(left) end
  end
  if remote then remote:close() end
  for _, s in ipairs(stores) do s:close() end
  return verdict, seconds
end

-- What must not change between an uninterrupted game and a replayed one.
local function summary(v)
  local iv = v.interval or {}
  return {outcome = v.outcome, first_step = iv.first_step, last_step = iv.last_step, root = v.root,
          auditor_root = v.auditor_root, trainer_leaf = v.trainer_leaf, auditor_leaf = v.auditor_leaf,
          judge_leaf = v.judge_leaf, illegitimate = v.evidence and v.evidence.illegitimate,
          forfeit = v.forfeit}
end

local FORFEIT = {trainer = "trainer_at_fault", auditor = "auditor_at_fault", judge = "inconclusive"}

-- Reference runs and games, uninterrupted, every party in this process.
local ref = {}
for _, name in ipairs{"honest", "poisoned"} do
  local dir = tmp .. "/ref-" .. name
  local runner = party.trainer(dir .. "/trainer", name == "poisoned")
  runner:run{progress = false}
  ref[name] = {root = runner:root()}
  runner:store():close()
  local verdict, seconds = play(dir .. "/trainer", dir .. "/auditor", dir .. "/judge")
  ref[name].verdict, ref[name].seconds = summary(verdict), seconds
  local a = vt.store.open(dir .. "/auditor", {read_only = true})
  ref[name].replay = {}
  local replay = a:run("game-" .. games)
  for i = 0, replay:size() - 1 do ref[name].replay[i] = replay:leaf(i) end
  a:close()
end

local s = T.suite("crash")

s:test("references: the honest run is accepted, the poisoned one blamed on the trainer at its first leaf", function()
  T.assert_eq(ref.honest.verdict.outcome, "accepted")
  T.assert_eq(ref.poisoned.verdict.outcome, "trainer_at_fault")
  T.assert_eq(ref.poisoned.verdict.first_step, 13)
end)

-- The poisoned run, trained by processes killed at random moments of their training until
-- eight kills have interrupted it; then one trains it to the end.
local crashed = tmp .. "/crashed-trainer"
s:test("a trainer killed at random moments while it trains resumes to the same root", function()
  local function start(dir)
    local child = vt.process.spawn{vt.executable(), "crash_party.lua", "train", dir, "poisoned"}
    T.assert_eq(child:receive(120), "ready")
    return child
  end
  -- How long the steps of a whole training take after "ready" (on a store that is then
  -- removed): to the end of the next-to-last step, scaled to all steps. The last leaf's
  -- flush to SST files comes on top and is not measured.
  local steps = tonumber(party.spec:get("steps"))
  local probe = start(tmp .. "/probe")
  local span
  for s = 1, steps do
    local line = probe:receive(120)
    local step, seconds = line:match("^step (%d+) ([%d.]+)$")
    T.assert_eq(tonumber(step), s, line)
    if s == steps - 1 then span = tonumber(seconds) * steps / (steps - 1) end
  end
  T.assert_eq(probe:receive(120), "done " .. ref.poisoned.root)
  probe:wait(30)
  os.execute("rm -rf '" .. tmp .. "/probe'")
  local want = vt.store.open(tmp .. "/ref-poisoned/trainer", {read_only = true})
  local interrupted, written = 0, 0
  for _ = 1, 30 do
    local child = start(crashed)
    -- A moment of what is left to train (busy waiting: a sleep process is too coarse here).
    local delay = math.random() * span * (1 - written / steps)
    local until_ = vt.clock() + delay
    while vt.clock() < until_ do end
    child:kill()
    child:wait(5)
    -- Whatever the moment, the store opens as a consistent prefix of the run.
    local st = vt.store.open(crashed)
    local report = st:verify()
    T.assert_true(report.ok, "after a kill at " .. delay .. " s: " .. tostring(report.problems[1] and report.problems[1].message))
    local run = st:run("run")
    local info = run and run:info()
    for i = 0, (run and run:size() or 0) - 1 do T.assert_eq(run:leaf(i), want:run("run"):leaf(i), "leaf " .. i) end
    print(string.format("  trainer killed %.2f ms into its training: %s", delay * 1000,
                        info and string.format("%d steps, %d leaves kept", info.steps_written, info.leaves) or "no run yet"))
    written = info and info.steps_written or 0
    st:close()
    if info and info.complete then
      os.execute("rm -rf '" .. crashed .. "'")  -- nothing left to interrupt: start over
      written = 0
    else
      interrupted = interrupted + 1
      if interrupted == 8 then break end
    end
  end
  want:close()
  T.assert_eq(interrupted, 8)
  local child = start(crashed)
  local line
  repeat line = child:receive(120) until line == nil or line:sub(1, 5) ~= "step "
  T.assert_eq(line, "done " .. ref.poisoned.root)
  T.assert_eq(child:wait(30), 0)
end)

-- A party of the game in its own process: one whole game (the uninterrupted verdict, and how
-- long such a game takes), three games in which it is killed at a random moment of that
-- span, then a whole game again with the party restarted on the same store.
local function kill_party(name, role, trainer_dir)
  local dir = tmp .. "/" .. name .. "-" .. role
  os.execute("mkdir -p '" .. dir .. "'")
  local dirs = {trainer = trainer_dir, auditor = dir .. "/auditor", judge = dir .. "/judge"}
  local want = ref[name].verdict
  local verdict, span = play(dirs.trainer, dirs.auditor, dirs.judge, role)
  T.assert_eq(summary(verdict), want)
  -- The judge works only at the end of a game: its kills land in that part.
  local from = role == "judge" and math.max(0, span - 2 * verdict.judge_seconds - 0.02) or 0
  for _ = 1, 3 do
    local delay = from + math.random() * (span - from)
    verdict = play(dirs.trainer, dirs.auditor, dirs.judge, role, delay)
    local got = summary(verdict)
    local note = string.format("  %s run, %s killed %.3f s into a %.3f s game: %s", name, role, delay, span,
                               verdict.forfeit and "forfeit" or "the game had ended")
    if got.outcome ~= want.outcome or got.forfeit then
      -- Killed before the end: that party forfeits; no other party is blamed.
      T.assert_eq(verdict.forfeit, role, name .. ", " .. role .. " killed after " .. delay .. " s: " .. verdict.reason)
      T.assert_eq(verdict.outcome, FORFEIT[role])
      -- Its process died: before reading the request, or before answering it.
      T.assert_true(verdict.reason:find("its process ended without answering", 1, true) ~= nil or
                    verdict.reason:find("does not read its input", 1, true) ~= nil, verdict.reason)
    else
      T.assert_eq(got, want, name .. ", " .. role .. " killed after " .. delay .. " s (after the game)")
    end
    -- The killed party's store: opens, verifies, and holds what it held.
    local st = vt.store.open(dirs[role])
    local report = st:verify()
    T.assert_true(report.ok, role .. " store: " .. tostring(report.problems[1] and report.problems[1].message))
    if role == "trainer" then
      T.assert_eq(st:run("run"):root(), ref[name].root)
      T.assert_true(st:run("run"):info().complete)
    elseif role == "auditor" then
      local replay = st:run("game-" .. games)
      for i = 0, (replay and replay:size() or 0) - 1 do
        T.assert_eq(replay:leaf(i), ref[name].replay[i], "auditor replay leaf " .. i)
      end
      note = note .. string.format(", its replay had %d of %d leaves", replay and replay:size() or 0, #ref[name].replay + 1)
    end
    -- Every transcript entry the party wrote before it died is whole.
    local entries = st:transcript("game-" .. games)
    for _, entry in ipairs(entries) do T.assert_true(pcall(vt.json.decode, entry), entry) end
    print(note .. string.format(", %d transcript entries", #entries))
    st:close()
  end
  -- Restarted on the same store: the uninterrupted game's verdict.
  T.assert_eq(summary(play(dirs.trainer, dirs.auditor, dirs.judge, role)), want)
end

for _, case in ipairs{{"honest", "trainer"}, {"honest", "auditor"}, {"poisoned", "trainer"}, {"poisoned", "auditor"},
                      {"poisoned", "judge"}} do
  local name, role = case[1], case[2]
  s:test(string.format("%s run: the %s killed at random moments of the game, then restarted", name, role), function()
    -- The poisoned games run on the store the killed trainer wrote.
    kill_party(name, role, name == "poisoned" and crashed or tmp .. "/ref-honest/trainer")
  end)
end

local passed, failed = T.run{exit = false}
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
