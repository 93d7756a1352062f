-- The verification game: every scenario of PROTOCOL.md decided correctly, in one process and
-- with the auditor and judge in their own processes under process-level profiles; transcripts;
-- messages; errors users can cause.
local T = require "vt.test"
local game = require "vt.game"
local scenarios = require "protocols.scenarios"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")

local ctx = scenarios.context{setup = "tiny", dir = tmp .. "/local"}

-- A finished 4-step run of the tiny setup, in its own store under `dir`.
local function small_run(c, dir)
  local spec = vt.spec{model = vt.models.mlp(c.setup.model), data = c.data, steps = 4, batch = 8, checkpoint_every = 2}
  local runner = vt.trainer{spec = spec, data = c.data, store = vt.store.open(dir .. "/t")}
  runner:run{progress = false}
  return runner
end

local s = T.suite("game scenarios")
for _, scenario in ipairs(scenarios.list) do
  s:test(scenario.name .. " -> " .. scenarios.expected(scenario, scenario.window or "tight"), function()
    local r = scenarios.run(scenario.name, ctx)
    T.assert_true(r.ok, scenario.name .. ": " .. table.concat(r.problems, "; ") .. " (" .. tostring(r.verdict.reason) .. ")")
    if scenario.localised and r.expected ~= "accepted" then
      -- The dispute is exactly the interval holding the first cheating step (13, or the
      -- random one), found by bisection over 6 leaves in at most ceil(log2(6)) = 3 rounds.
      local first = math.floor((r.from_step - 1) / 4) * 4 + 1
      T.assert_eq(r.verdict.interval.first_step, first)
      T.assert_eq(r.verdict.interval.last_step, first + 3)
      T.assert_true(r.verdict.rounds <= 3)
    end
  end)
end

s:test("paper window: poisoning is decided by the judge's leaf", function()
  local paper = scenarios.context{setup = "tiny", window = "paper", dir = tmp .. "/paper"}
  local r = scenarios.run("poison_labels", paper)
  T.assert_eq(r.verdict.outcome, "trainer_at_fault")
  T.assert_eq(r.verdict.judge_leaf, r.verdict.auditor_leaf)
  T.assert_ne(r.verdict.judge_leaf, r.verdict.trainer_leaf)
  -- Off the grid |x' - mid| <= spacing/2 = 2w: no direction is illegitimate there. The
  -- poisoned trainer's directions where the honest values are on the grid are: no honest
  -- trainer writes one there (docs/ROUNDING.md, "Legitimate entries"; before 2026-11-29 they
  -- were accepted and this count was 0).
  T.assert_true(r.verdict.evidence.illegitimate > 0, tostring(r.verdict.evidence.illegitimate))
  local lazy = scenarios.run("lazy", paper)
  T.assert_eq(lazy.verdict.outcome, "trainer_at_fault")
  T.assert_true(lazy.verdict.evidence.log_mismatches > 0)
  T.assert_true(lazy.verdict.evidence.steps[1].log_mismatch:find("no log record for boundary 'fc0.weight:momentum' call 0 at step 13", 1, true) ~= nil,
                lazy.verdict.evidence.steps[1].log_mismatch)
end)

local remote = T.suite("game across processes")
local rctx = scenarios.context{setup = "tiny", dir = tmp .. "/remote", remote = true,
                               profiles = {trainer = "native", auditor = "nofma", judge = "refblas"}}
for _, name in ipairs{"honest", "poison_labels", "lying_auditor", "rewrite_logs"} do
  remote:test(name .. " with the auditor on nofma and the judge on refblas", function()
    local r = scenarios.run(name, rctx)
    T.assert_true(r.ok, name .. ": " .. table.concat(r.problems, "; ") .. " (" .. tostring(r.verdict.reason) .. ")")
  end)
end

local t = T.suite("game transcripts and messages")
t:test("every party's store holds the messages it sent and received; the client the verdict", function()
  local dir = tmp .. "/transcripts"
  local c = scenarios.context{setup = "tiny", dir = dir}
  scenarios.run("poison_labels", c)
  local function entries(name)
    local store = vt.store.open(dir .. "/poison_labels-1-" .. name, {read_only = true})
    local list = store:transcript("game")
    local decoded = {}
    for i, e in ipairs(list) do decoded[i] = vt.json.decode(e) end
    store:close()
    return decoded
  end
  local client, auditor, judge = entries("client"), entries("auditor"), entries("judge")
  T.assert_eq(client[1].type, "commit")
  T.assert_eq(client[1].kind, "request")
  T.assert_eq(client[#client].kind, "verdict")
  T.assert_eq(client[#client].body.outcome, "trainer_at_fault")
  -- The auditor saw its audit request, its logs requests to the trainer and their replies, the bisection.
  local types = {}
  for _, m in ipairs(auditor) do types[m.type or m.kind] = (types[m.type or m.kind] or 0) + 1 end
  T.assert_true(types.audit == 2 and types.logs >= 2 and types.bisect == 2 and types.leaf >= 2, vt.pretty.format(types))
  -- Large byte fields (checkpoints) are kept as digest and size.
  local handover
  for _, m in ipairs(judge) do
    if m.type == "handover" and m.kind == "reply" then handover = m end
  end
  T.assert_eq(type(handover.body.checkpoint), "table")
  T.assert_eq(#handover.body.checkpoint.sha256, 64)
end)

-- RFC 6962's definition of the tree (MTH and PATH, section 2.1), the way scripts/vt/game.lua
-- computed it in Lua before vt.game.merkle became a list-of-leaves front for vt.merkle.
local function largest_power_below(n)
  local k = 1
  while k * 2 < n do k = k * 2 end
  return k
end
local function mth(leaves, lo, hi)
  local n = hi - lo
  if n == 0 then return vt.merkle.empty_root() end
  if n == 1 then return vt.merkle.leaf_hash(leaves[lo + 1]) end
  local k = largest_power_below(n)
  return vt.merkle.node_hash(mth(leaves, lo, lo + k), mth(leaves, lo + k, hi))
end
local function path(m, leaves, lo, hi)
  local n = hi - lo
  if n <= 1 then return {} end
  local k = largest_power_below(n)
  local p
  if m < k then
    p = path(m, leaves, lo, lo + k)
    p[#p + 1] = mth(leaves, lo + k, hi)
  else
    p = path(m - k, leaves, lo + k, hi)
    p[#p + 1] = mth(leaves, lo, lo + k)
  end
  return p
end

t:test("the game's Merkle tree equals the store's and RFC 6962's definition (roots and proofs, sizes 0..17)", function()
  local store = vt.store.open(tmp .. "/merkle")
  local run = store:create_run("r", {spec = "s", checkpoint_every = 1, steps = 16})
  run:put_checkpoint(0, {{name = "w", tensor = vt.tensor{0}}})
  local leaves = {run:leaf(0)}
  for step = 1, 16 do
    run:write_step(step, {})
    run:put_checkpoint(step, {{name = "w", tensor = vt.tensor{step}}})
    leaves[#leaves + 1] = run:leaf(step)
  end
  T.assert_eq(game.merkle.root(leaves, 0), mth(leaves, 0, 0))
  for size = 1, 17 do
    T.assert_eq(game.merkle.root(leaves, size), run:root(size))
    T.assert_eq(game.merkle.root(leaves, size), mth(leaves, 0, size))
    for i = 0, size - 1 do
      T.assert_eq(game.merkle.prove(leaves, i, size), run:prove(i, size))
      T.assert_eq(game.merkle.prove(leaves, i, size), path(i, leaves, 0, size))
    end
  end
  T.assert_eq(game.merkle.root(leaves), mth(leaves, 0, #leaves))
  T.assert_eq(game.merkle.prove(leaves, 5), path(5, leaves, 0, #leaves))
  -- Leaves no store holds (an auditor's claimed ones), up to 40.
  local claimed = {}
  for n = 1, 40 do
    claimed[n] = vt.store.sha256("claimed leaf " .. n)
    T.assert_eq(game.merkle.root(claimed), mth(claimed, 0, n))
    for i = 0, n - 1 do T.assert_eq(game.merkle.prove(claimed, i), path(i, claimed, 0, n)) end
  end
  store:close()
end)

t:test("a party that raises an error forfeits; the error is in the verdict", function()
  local c = scenarios.context{setup = "tiny", dir = tmp .. "/errors"}
  local trained = small_run(c, tmp .. "/errors")
  local net = game.network{}
  local trainer = net:add(game.trainer{runner = trained})
  trainer.handlers.logs = function() error("disk on fire") end
  net:add(game.auditor{store = vt.store.open(tmp .. "/errors/a"), data = c.data, profile = "splitk4"})
  net:add(game.judge{store = vt.store.open(tmp .. "/errors/j"), data = c.data})
  local v = game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/errors/c"), spec = trained:spec()}}
  T.assert_eq(v.outcome, "trainer_at_fault")
  T.assert_true(v.reason:find("disk on fire", 1, true) ~= nil, v.reason)
end)

t:test("a malformed answer makes the answering party lose", function()
  local c = scenarios.context{setup = "tiny", dir = tmp .. "/malformed"}
  local trained = small_run(c, tmp .. "/malformed")
  for _, case in ipairs{
    {"logs", function() return {leaf = {index = 1}, steps = "lots"} end, "field 'leaf' is missing or invalid"},
    {"logs", function(self, body) local m = self:leaf_message(body.leaf) return {leaf = m, steps = {{step = "one"}}} end,
     "field 'steps' is missing or invalid"},
    {"commit", function() return {spec = "x", spec_hash = "zz", n_leaves = 3, root = string.rep("0", 64), checkpoint_every = 2, steps = 4} end,
     "field 'spec_hash' is missing or invalid"},
  } do
    local net = game.network{}
    local trainer = net:add(game.trainer{runner = trained})
    trainer.handlers[case[1]] = case[2]
    net:add(game.auditor{store = vt.store.open(tmp .. "/malformed/a-" .. case[3]:sub(8, 12)), data = c.data, profile = "splitk4"})
    net:add(game.judge{store = vt.store.open(tmp .. "/malformed/j-" .. case[3]:sub(8, 12)), data = c.data})
    local v = game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/malformed/c-" .. case[3]:sub(8, 12)), spec = trained:spec()}}
    T.assert_eq(v.outcome, "trainer_at_fault", v.reason)
    T.assert_true(v.reason:find(case[3], 1, true) ~= nil, v.reason)
  end
end)

t:test("a judge that cannot replay (other data) gives an inconclusive verdict naming why", function()
  local c = scenarios.context{setup = "tiny", dir = tmp .. "/judge-data"}
  local r = scenarios.run("poison_labels", c)  -- trains the poisoned run in this context
  local trained = c.trained["tight-labels-" .. c.from_step].runner
  local net = game.network{}
  net:add(game.trainer{runner = trained})
  net:add(game.auditor{store = vt.store.open(tmp .. "/judge-data/a2"), data = c.data, profile = "splitk4"})
  local other = vt.data.synthetic{size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 4}
  net:add(game.judge{store = vt.store.open(tmp .. "/judge-data/j2"), data = other, profile = "blocked"})
  local v = game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/judge-data/c2"), spec = trained:spec()}}
  T.assert_eq(r.verdict.outcome, "trainer_at_fault")
  T.assert_eq(v.outcome, "inconclusive")
  -- The judge says what it lacks (it does not fail: a judge holding the spec's data that
  -- cannot build the run would blame the trainer).
  T.assert_eq(v.forfeit, nil)
  T.assert_true(v.reason:find("the judge cannot replay the spec: its data set", 1, true) ~= nil, v.reason)
  T.assert_true(v.reason:find("digest", 1, true) ~= nil, v.reason)
  T.assert_eq(v.interval.first_step, 13)
end)

t:test("the same party stores hold two games", function()
  local c = scenarios.context{setup = "tiny", dir = tmp .. "/two-games"}
  local trained = small_run(c, tmp .. "/two-games")
  local stores = {a = vt.store.open(tmp .. "/two-games/a"), j = vt.store.open(tmp .. "/two-games/j"),
                  c = vt.store.open(tmp .. "/two-games/c")}
  local games = {}
  for i = 1, 2 do
    local net = game.network{}
    net:add(game.trainer{runner = trained})
    net:add(game.auditor{store = stores.a, data = c.data, profile = "splitk4"})
    net:add(game.judge{store = stores.j, data = c.data})
    local v = game.play{network = net, client = game.client{store = stores.c, spec = trained:spec()}}
    T.assert_eq(v.outcome, "accepted")
    games[i] = net.game
  end
  T.assert_ne(games[1], games[2])
  -- Replaying a game id again in the same auditor store is refused, naming what to do.
  local net = game.network{game = games[1]}
  net:add(game.trainer{runner = trained})
  net:add(game.auditor{store = stores.a, data = c.data, profile = "splitk4"})
  net:add(game.judge{store = stores.j, data = c.data})
  local again = game.play{network = net, client = game.client{store = stores.c, spec = trained:spec()}}
  T.assert_eq(again.outcome, "auditor_at_fault")
  T.assert_true(again.reason:find("play each game under a new id", 1, true) ~= nil, again.reason)
  T.assert_eq(#stores.c:games(), 2)
  T.assert_eq(#stores.a:runs(), 2)
end)

local e = T.suite("game errors")
e:test("constructors name what is missing or unknown", function()
  T.assert_error(function() game.auditor{store = vt.store.open(tmp .. "/e1")} end, "option 'data' is required")
  T.assert_error(function() game.judge{data = ctx.data} end, "option 'store' is required")
  T.assert_error(function() game.client{store = vt.store.open(tmp .. "/e2"), colour = 1} end,
                 "unknown option 'colour' (valid: name, spec, store)", true)
  T.assert_error(function() game.data{kind = "imagenet"} end, "unknown data kind 'imagenet'")
  T.assert_error(function() game.remote{role = "client"} end, "role must be")
  T.assert_error(function() scenarios.run("nope", ctx) end, "unknown scenario 'nope' (valid: honest,", true)
end)

e:test("deviations are checked", function()
  local spec = vt.spec{model = vt.models.mlp(ctx.setup.model), data = ctx.data, steps = 2, batch = 4}
  local n = 0
  local function trainer(deviate)
    n = n + 1
    return vt.trainer{spec = spec, data = ctx.data, store = vt.store.open(tmp .. "/dev-" .. n), deviate = deviate}
  end
  T.assert_error(function() trainer{kind = "sloth"} end,
                 "unknown deviation 'sloth' (valid: none, labels, trigger, lazy, lr, weight_decay, steer, silent_flip, forge_exact, " ..
                 "flip_within, replace_example, steer_toward)", true)
  T.assert_error(function() trainer{kind = "lr", from_step = 0} end, "from_step must be >= 1, got 0")
  T.assert_error(function() trainer{kind = "lr", from_step = 2, to_step = 1} end, "to_step must be >= from_step (2) or 0, got 1",
                 true)
  T.assert_error(function() trainer{kind = "flip_within", amount = 1.5} end,
                 "flip_within amount (values per boundary call) must be an integer, got 1.5", true)
  T.assert_error(function() trainer{kind = "trigger", target = 9} end, "trigger target must be a class in [0, 4), got 9", true)
  T.assert_error(function() trainer{kind = "lr", speed = 2} end, "unknown option 'speed'")
  local text = vt.data.synthetic{size = 64, input_shape = {16}, classes = 4}
  local tspec = vt.spec{model = vt.models.mlp{input_shape = {16}, hidden = {8}, classes = 4}, data = text, steps = 2, batch = 4}
  T.assert_error(function()
    vt.trainer{spec = tspec, data = text, store = vt.store.open(tmp .. "/dev-text"), deviate = {kind = "trigger"}}
  end, "a trigger patch (trigger) needs image data", true)
  T.assert_error(function()
    vt.auditor{spec = spec, data = ctx.data, logs = "given", start = {step = 1}}
  end, "start step 1 needs the checkpoint after it")
end)

e:test("a given-records auditor asks for its records", function()
  local spec = vt.spec{model = vt.models.mlp(ctx.setup.model), data = ctx.data, steps = 2, batch = 4}
  local a = vt.auditor{spec = spec, data = ctx.data, logs = "given"}
  T.assert_error(function() a:step() end, "pass step 1's records to step(records)", true)
  T.assert_error(function() a:step{{boundary = 3}} end, "record 1: boundary must be a string", true)
  local tr = vt.trainer{spec = spec, data = ctx.data, mode = "fp64"}
  T.assert_error(function() tr:step{} end, "records are only for an auditor made with logs = \"given\"", true)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
