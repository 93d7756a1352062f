-- Adaptive cheats against the game's own rules (not the training): a party that has read
-- vt.game and answers, asks or claims whatever helps it. Each test is a forgery that won, or
-- convicted an honest party, before the check that now decides it; each names the verdict
-- PROTOCOL.md requires. The parties are overridden the way a cheater's own code would do it:
-- its handlers replaced, or a Merkle tree of its own served.
local T = require "vt.test"
local game = require "vt.game"
local wire = require "vt.game.wire"
local commitment = require "vt.game.commitment"
local list = require "protocols.scenario_list"

local tmp = vt.fs.tmpdir("vtrun-game-attacks")
local setup = list.setups.tiny
local data = game.data(setup.data)
local ZERO = commitment.ZERO
local K, N = setup.k, setup.steps
local function json_type(text) return vt.json.decode(text).type end

local function copy(t)
  if type(t) ~= "table" then return t end
  local o = {}
  for k, v in pairs(t) do o[k] = copy(v) end
  return o
end
local spec = vt.spec{model = vt.models.mlp(copy(setup.model)), data = data, optim = vt.optim.sgd(copy(setup.optim)),
                     batch = setup.batch, steps = N, seed = 1, checkpoint_every = K, round = {bits = 32, band = 1 / 16}}

local trained = {}
local function train(name, deviate)
  if trained[name] then return trained[name] end
  local runner = vt.trainer{spec = spec, data = data, store = vt.store.open(tmp .. "/trainer-" .. name), profile = "native",
                            run = "run", deviate = deviate}
  runner:run{progress = false}
  trained[name] = runner
  return runner
end
local POISON_FROM = 13  -- leaf 4 (steps 13..16)
local function honest() return train("honest") end
local function poisoned() return train("labels", {kind = "labels", from_step = POISON_FROM}) end

local games = 0
local function auditor_party()
  games = games + 1
  return game.auditor{store = vt.store.open(tmp .. "/a" .. games), data = data, profile = "splitk4"}
end
-- Plays one game; returns the verdict.
local function play(trainer_party, auditor, options)
  games = games + 1
  local net = game.network{game = "g" .. games, deadlines = options and options.deadlines}
  net:add(trainer_party)
  net:add(auditor or auditor_party())
  net:add(game.judge{store = vt.store.open(tmp .. "/j" .. games), data = data, profile = "blocked"})
  return game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/c" .. games),
                                                       spec = options and options.spec or spec}}
end
local function expect(v, outcome, reason)
  T.assert_eq(v.outcome, outcome, v.reason)
  if reason then T.assert_true(v.reason:find(reason, 1, true) ~= nil, "reason: " .. tostring(v.reason)) end
end

-- `party` with its answers to `type_` edited: change(reply, body, message) after its own
-- handler answered (what a cheater's own code does).
local function edit(party, type_, change)
  local answer = party.handlers[type_]
  party.handlers[type_] = function(self, body, m)
    local r = answer(self, body, m)
    change(r, body, m, self)
    return r
  end
  return party
end

-- A trainer that serves a tree of its own making: leaf i of digests infos[i], the steps of
-- steps_by_leaf[i], the checkpoints of ckpts[i].
local function fake_trainer(base, infos, steps_by_leaf, ckpts)
  local text = base:store():run("run"):spec()
  local h = vt.store.sha256(text)
  local n = #infos + 1
  local tree, leaves = vt.merkle.tree(), {}
  for i = 0, n - 1 do
    leaves[i] = vt.store.leaf(h, i, infos[i].state_digest, infos[i].log_digest)
    tree:append(leaves[i])
  end
  local t = game.trainer{runner = base}
  local function msg(i)
    return {index = i, leaf = leaves[i], state_digest = infos[i].state_digest, log_digest = infos[i].log_digest,
            proof = tree:prove(i)}
  end
  t.handlers.commit = function()
    return {spec = text, spec_hash = h, n_leaves = n, root = tree:root(), checkpoint_every = K, steps = N}
  end
  t.handlers.logs = function(_, body) return {leaf = msg(body.leaf), steps = steps_by_leaf[body.leaf] or {}} end
  t.handlers.leaf = function(_, body)
    local m = msg(body.index)
    m.prefix_root = tree:root(body.index + 1)
    m.consistency = tree:consistency(body.index + 1, n)
    return m
  end
  t.handlers.handover = function(_, body)
    local j = body.leaf
    return {leaf = j, steps = steps_by_leaf[j] or {}, checkpoint = j > 0 and ckpts[j - 1] or nil}
  end
  t.handlers.weights = function() return {leaf = msg(n - 1), checkpoint = ckpts[n - 1]} end
  return t
end
-- A run's leaves' digests, steps by leaf and checkpoints, as fake_trainer takes them.
local function run_tables(runner)
  local run = runner:store():run("run")
  local infos, steps, ckpts = {}, {}, {}
  for i = 0, run:size() - 1 do
    local li = run:leaf_info(i)
    infos[i] = {state_digest = li.state_digest, log_digest = li.log_digest}
    ckpts[i] = run:checkpoint(i)
    local first, last = commitment.interval(i, K, N)
    if first then
      steps[i] = {}
      for s = first, last do steps[i][#steps[i] + 1] = {step = s, records = run:step(s)} end
    end
  end
  return infos, steps, ckpts
end

local a = T.suite("a lying auditor against an honest trainer")
a:test("a forfeit of the trainer claimed in the auditor's reply is the auditor's", function()
  local aud = auditor_party()
  aud.handlers.audit = function() wire.forfeit("trainer", "made up by the auditor") end
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "which the network never saw")
end)
a:test("a bad answer in bisection the trainer never gave is the auditor's", function()
  local aud = edit(auditor_party(), "audit", function(r) r.root = ZERO end)
  aud.handlers.bisect = function() return {rounds = 1, first_differing = 1, bad_answer = "made up", seq = 2, answer = {}} end
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "did not carry from the trainer")
end)
-- An auditor that claims the trainer's logs of leaf 2 did not verify, showing the answer it
-- got; `change(answer, question)` may edit either first (the claim names question.leaf).
local function claiming_bad_logs(change)
  return edit(auditor_party(), "audit", function(r, body, _, self)
    local q = {leaf = 2}
    local answer, seq = self:request(body.trainer, "logs", q)
    change(answer, q)
    r.evidence = {kind = "bad_answer", type = "logs", leaf = q.leaf, seq = seq, answer = answer, reason = "made up"}
  end)
end
a:test("a bad answer shown other than the trainer gave it is the auditor's", function()
  local aud = claiming_bad_logs(function(answer) answer.steps[1].records[1].value = "edited" end)
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "is not the one the trainer gave")
end)
a:test("a bad answer that verifies is the auditor's", function()
  expect(play(game.trainer{runner = honest()}, claiming_bad_logs(function() end)), "auditor_at_fault", "but it does")
end)
a:test("a question changed after it was asked is the auditor's, not the trainer's", function()
  -- The network attests the question as it crossed, not the asker's table.
  local aud = claiming_bad_logs(function(_, q) q.leaf = 3 end)
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "did not carry from the trainer")
end)
a:test("a request the auditor may not send makes it forfeit, even when it catches the error", function()
  local aud = edit(auditor_party(), "audit", function(_, body, _, self) pcall(self.request, self, body.trainer, "weights", {}) end)
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "may not ask that")
end)
a:test("an answer nested past what the messages carry is its sender's fault", function()
  local function deep(n)
    local t = {}
    for _ = 1, n do t = {t} end
    return t
  end
  local aud = edit(auditor_party(), "audit", function(r) r.junk = deep(198) end)
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "nested deeper than")
  -- The trainer's bad logs with junk the honest auditor would carry on in its evidence.
  local tr = edit(game.trainer{runner = poisoned()}, "logs", function(r) r.junk = deep(196) r.steps = {} end)
  expect(play(tr), "trainer_at_fault", "nested deeper than")
end)
a:test("evidence naming a leaf outside the run is the auditor's", function()
  for _, leaf in ipairs{0, 6, -1, 1.5} do
    local aud = edit(auditor_party(), "audit", function(r) r.evidence = {kind = "illegitimate", leaf = leaf} end)
    expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "does not name a leaf of the run")
  end
end)
a:test("evidence the judge's replay does not bear out is a false alarm", function()
  local aud = edit(auditor_party(), "audit", function(r) r.evidence = {kind = "illegitimate", leaf = 2} end)
  local v = play(game.trainer{runner = honest()}, aud)
  expect(v, "auditor_at_fault", "false alarm")
  T.assert_eq(v.evidence.near_limit, 0)  -- an honest run: no entry in the outer part of a window
end)
a:test("flagged entries the judge applies in the outer part of its window leave the dispute inconclusive", function()
  -- Legitimacy is judged at each party's own values: an entry the judge accepts in the outer
  -- part of its window (here: directions that move nothing, between 1.5w and 2w from their
  -- midpoints) may lie beyond the window at the auditor's, and a trainer that knows both
  -- profiles can write one there on purpose (THREAT_MODEL.md). This trainer's run is the
  -- honest one with such entries added to one record of step 5 (they change no value, so the
  -- checkpoints stay), and the auditor's evidence names that interval: the judge cannot refute
  -- the claim. The same claim on the honest run is the auditor's fault (the test above).
  local hr = honest():store():run("run")
  local capture = vt.auditor{spec = spec, data = data, logs = honest(), capture = {"fwd"}}
  local captured
  for _ = 1, 5 do captured = capture:step().captured end
  local name = "fc0:fwd"
  T.assert_true(captured[name .. "#0"] ~= nil, "the step's input to " .. name)
  -- Every value within 1.9w of its midpoint logged, in the direction it rounds (w = g/16):
  -- those beyond w are no honest entry, and those beyond 1.5w in the outer part.
  local _, wide = vt.round(captured[name .. "#0"], {bits = 32, band = 1.9 / 16})
  local forged = vt.store.open(tmp .. "/near-edge")
  local run = forged:create_run("run", {spec = hr:spec(), checkpoint_every = K, steps = N})
  run:put_checkpoint(0, hr:checkpoint(0))
  for step = 1, N do
    local records = {}
    for _, r in ipairs(hr:step(step)) do
      if step == 5 and r.boundary == name and r.call == 0 then r = {boundary = r.boundary, call = 0, value = wide:encode()} end
      records[#records + 1] = r
    end
    run:write_step(step, records)
    if step % K == 0 then run:put_checkpoint(step / K, hr:checkpoint(step / K)) end
  end
  T.assert_eq(run:root() ~= hr:root(), true)
  local aud = edit(auditor_party(), "audit", function(r) r.evidence = {kind = "illegitimate", leaf = 2} end)
  local v = play(game.trainer{store = forged, run = "run"}, aud)
  expect(v, "inconclusive", "outer part of its window")
  T.assert_true(v.evidence.near_limit > 0, "entries in the outer part")
  -- Evidence of another kind on the same interval is still a false alarm.
  aud = edit(auditor_party(), "audit", function(r) r.evidence = {kind = "log_mismatch", leaf = 2} end)
  expect(play(game.trainer{store = forged, run = "run"}, aud), "auditor_at_fault", "false alarm")
end)
a:test("a question outside the run is the asker's fault, not the trainer's", function()
  local aud = auditor_party()
  local audit = aud.handlers.audit
  aud.handlers.audit = function(self, body) self:request(body.trainer, "logs", {leaf = 99}) return audit(self, body) end
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "outside the run")
end)
a:test("a request outside the protocol's routes is the sender's fault", function()
  local aud = auditor_party()
  local audit = aud.handlers.audit
  aud.handlers.audit = function(self, body) self:request(body.trainer, "weights", {}) return audit(self, body) end
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "may not ask that")
end)
a:test("a bisection that names no leaf while the roots differ is the auditor's", function()
  local aud = edit(auditor_party(), "audit", function(r) r.root = ZERO end)
  aud.handlers.bisect = function() return {agreed = true, rounds = 0} end
  expect(play(game.trainer{runner = honest()}, aud), "auditor_at_fault", "names no leaf")
end)

local t = T.suite("a cheating trainer")
t:test("a forfeit of the auditor claimed in the trainer's answer is the trainer's", function()
  local tr = game.trainer{runner = poisoned()}
  tr.handlers.logs = function() wire.forfeit("auditor", "made up by the trainer") end
  expect(play(tr), "trainer_at_fault", "which the network never saw")
  local tr2 = edit(game.trainer{runner = poisoned()}, "leaf", function(_, _, m)
    if m.from == "judge" then wire.forfeit("auditor", "made up by the trainer") end
  end)
  expect(play(tr2), "trainer_at_fault", "which the network never saw")
end)
t:test("a commitment to another spec than the client's is the trainer's", function()
  local tr = edit(game.trainer{runner = poisoned()}, "commit", function(c)
    c.spec = c.spec:gsub("\nsteps=" .. N .. "\n", "\nsteps=1\n")
    c.spec_hash = vt.store.sha256(c.spec)
  end)
  expect(play(tr), "trainer_at_fault", "committed to another spec")
  local tr2 = edit(game.trainer{runner = poisoned()}, "commit", function(c) c.n_leaves = c.n_leaves + 1 end)
  expect(play(tr2), "trainer_at_fault", "does not fit the spec")
end)
t:test("logs with a duplicated record are the trainer's, not the auditor's", function()
  local tr = edit(game.trainer{runner = poisoned()}, "logs", function(r)
    local rec = r.steps[1].records[1]
    table.insert(r.steps[1].records, {boundary = rec.boundary, call = rec.call, value = rec.value})
  end)
  local v = play(tr)
  expect(v, "trainer_at_fault", "appears twice")
  T.assert_eq(v.evidence.kind, "bad_answer")
end)
t:test("a bisection answer without its prefix proof is the trainer's", function()
  local tr = edit(game.trainer{runner = poisoned()}, "leaf", function(r, _, m)
    if m.from == "auditor" then r.prefix_root = nil end
  end)
  expect(play(tr), "trainer_at_fault", "no prefix root")
end)
t:test("the judge's leaf j-1 answered with leaf j is the trainer's", function()
  local tr = game.trainer{runner = poisoned()}
  local leaf, first = tr.handlers.leaf, nil
  tr.handlers.leaf = function(self, body, m)
    if m.from == "judge" then
      if first == nil then
        first = body.index
      elseif body.index == first - 1 then
        return leaf(self, {index = first}, m)
      end
    end
    return leaf(self, body, m)
  end
  tr.handlers.handover = function(self, body)
    local out = game.trainer{runner = poisoned()}:on_handover(body)
    out.checkpoint = poisoned():store():run("run"):checkpoint(body.leaf)
    return out
  end
  expect(play(tr), "trainer_at_fault", "answered with leaf")
end)
t:test("leaves of no work (unchanged states, empty logs) are the trainer's", function()
  local infos, steps, ckpts = run_tables(honest())
  local none, same = {}, {}
  for i = 0, #infos do
    none[i] = {state_digest = infos[0].state_digest, log_digest = ZERO}
    same[i] = ckpts[0]
  end
  expect(play(fake_trainer(honest(), none, {}, same)), "trainer_at_fault", "covers 4 steps")
  -- Honest to leaf 2, then no work.
  local lazy, lazy_steps, lazy_ckpts = {}, {}, {}
  for i = 0, #infos do
    if i <= 2 then
      lazy[i], lazy_steps[i], lazy_ckpts[i] = infos[i], steps[i], ckpts[i]
    else
      lazy[i], lazy_ckpts[i] = {state_digest = infos[2].state_digest, log_digest = ZERO}, ckpts[2]
    end
  end
  local v = play(fake_trainer(honest(), lazy, lazy_steps, lazy_ckpts))
  expect(v, "trainer_at_fault", "covers 4 steps")
  T.assert_eq(v.interval.leaf, 3)
end)
t:test("bad logs shown to the auditor alone are the trainer's, and nothing after them is accepted", function()
  -- Step 9 (leaf 3, before the poisoning) withheld from the auditor; the judge would be
  -- handed the committed logs.
  local tr = game.trainer{runner = poisoned(), behaviour = {withhold_record = {step = 9}}}
  local straight = game.trainer{runner = poisoned()}
  tr.handlers.handover = function(_, body) return straight:on_handover(body) end
  local v = play(tr)
  expect(v, "trainer_at_fault", "log digest")
  T.assert_eq(v.interval.leaf, 3)
end)
t:test("a committed record that does not decode is the trainer's", function()
  local infos, steps, ckpts = run_tables(poisoned())
  for _, r in ipairs(steps[4][1].records) do
    if r.boundary ~= "~trace" then r.value = "garbage" break end
  end
  infos[4] = {state_digest = infos[4].state_digest, log_digest = commitment.log_digest_of(steps[4])}
  local v = play(fake_trainer(poisoned(), infos, steps, ckpts))
  expect(v, "trainer_at_fault")
  T.assert_eq(v.interval.leaf, 4)
end)
t:test("a leaf 0 that commits to logs is the trainer's", function()
  local infos, steps, ckpts = run_tables(honest())
  steps[0] = {steps[1][1]}
  infos[0] = {state_digest = vt.store.sha256("another initial state"), log_digest = commitment.log_digest_of(steps[0])}
  expect(play(fake_trainer(honest(), infos, steps, ckpts)), "trainer_at_fault", "leaf 0 (the initial state) commits to logs")
end)
t:test("a request the trainer may not send does not reach the auditor", function()
  -- It tries to replace the commitment the auditor bisects against.
  local tr = game.trainer{runner = poisoned()}
  local logs, done, refused = tr.handlers.logs, false, nil
  tr.handlers.logs = function(self, body, m)
    if not done then
      done = true
      local ok, err = pcall(self.request, self, "auditor", "audit",
                            {spec = spec:canonical(), spec_hash = spec:hash(), n_leaves = 1, root = ZERO, game = m.game,
                             trainer = "trainer"})
      refused = not ok and tostring(err)
    end
    return logs(self, body, m)
  end
  local v = play(tr)
  expect(v, "trainer_at_fault")
  T.assert_true(refused and refused:find("may not ask that", 1, true) ~= nil, tostring(refused))
end)
t:test("a second commitment does not widen the run's questions", function()
  -- A trainer asked to commit again answers with more leaves, so that a question past the
  -- run (an auditor's, asked on its behalf) would pass as valid.
  local tr = game.trainer{runner = honest()}
  local commit, calls = tr.handlers.commit, 0
  tr.handlers.commit = function(self, body, m)
    calls = calls + 1
    local r = commit(self, body, m)
    if calls > 1 then r.n_leaves = r.n_leaves + 8 end
    return r
  end
  games = games + 1
  local net = game.network{game = "g" .. games}
  net:add(tr)
  local auditor = net:add(auditor_party())
  net:add(game.client{store = vt.store.open(tmp .. "/c" .. games), spec = spec})
  local first = net:request("client", "trainer", "commit", {})
  local second = net:request("client", "trainer", "commit", {})
  T.assert_eq(second.n_leaves, first.n_leaves + 8)
  local ok, err = pcall(net.request, net, auditor.name, "trainer", "logs", {leaf = first.n_leaves})
  T.assert_true(not ok and wire.is_forfeit(err) and err.forfeit == auditor.name, tostring(err and err.reason or err))
  T.assert_true(err.reason:find("outside the run", 1, true) ~= nil, err.reason)
end)
t:test("a hand-over without a checkpoint, or a leaf without digests, is the trainer's", function()
  local tr = edit(game.trainer{runner = poisoned()}, "handover", function(r) r.checkpoint = nil end)
  expect(play(tr), "trainer_at_fault", "carries no checkpoint")
  local tr2 = edit(game.trainer{runner = poisoned()}, "leaf", function(r, _, m)
    if m.from == "judge" then r.state_digest = nil end
  end)
  expect(play(tr2), "trainer_at_fault", "without its state and log digests")
end)

t:test("a spec no runner accepts is the trainer's, not the honest auditor's", function()
  -- The trainer copies a poisoned run's steps under a spec whose model has one class fewer
  -- than the data (the spec parses; every runner refuses it): the auditor, holding the spec's
  -- data, cannot build the run, and before the fix forfeited for it.
  local misfit = vt.spec.parse((spec:canonical():gsub("model%.classes=(%d+)", function(n)
    return "model.classes=" .. (tonumber(n) - 1)
  end)))
  T.assert_true(not pcall(vt.trainer, {spec = misfit, data = data, mode = "rounded"}), "the misfit spec trains")
  local src = poisoned():store():run("run")
  local store = vt.store.open(tmp .. "/misfit-trainer")
  local run = store:create_run("run", {spec = misfit:canonical(), checkpoint_every = K, steps = N})
  run:put_checkpoint(0, src:checkpoint(0))
  for step = 1, N do
    run:write_step(step, src:step(step))
    if step % K == 0 or step == N then run:put_checkpoint(run:size(), src:checkpoint(run:size())) end
  end
  games = games + 1
  local net = game.network{game = "g" .. games}
  net:add(game.trainer{store = store, run = "run"})
  net:add(auditor_party())
  net:add(game.judge{store = vt.store.open(tmp .. "/j" .. games), data = data, profile = "blocked"})
  local v = game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/c" .. games), spec = misfit}}
  expect(v, "trainer_at_fault", "no honest trainer commits a run of it")
  T.assert_eq(v.audit.evidence.kind, "unreplayable")
end)
t:test("a fine-tuning spec plays with the initial weights given to auditor and judge", function()
  local weights = tmp .. "/init.safetensors"
  local pre = vt.trainer{spec = spec, data = data, mode = "rounded"}
  pre:step()
  pre:export(weights)
  local tuned = vt.spec{model = vt.models.mlp(copy(setup.model)), data = data, optim = vt.optim.sgd(copy(setup.optim)),
                        batch = setup.batch, steps = N, seed = 1, checkpoint_every = K, round = {bits = 32, band = 1 / 16},
                        init = weights}
  local function tuned_game(deviate, init)
    local runner = vt.trainer{spec = tuned, data = data, init = weights, deviate = deviate,
                              store = vt.store.open(tmp .. "/tuned-" .. (deviate and "poisoned" or "honest")), run = "run"}
    runner:run{progress = false}
    games = games + 1
    local net = game.network{game = "g" .. games}
    net:add(game.trainer{runner = runner})
    net:add(game.auditor{store = vt.store.open(tmp .. "/a" .. games), data = data, profile = "splitk4", init = init})
    net:add(game.judge{store = vt.store.open(tmp .. "/j" .. games), data = data, profile = "blocked", init = init})
    return game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/c" .. games), spec = tuned}}
  end
  expect(tuned_game(nil, weights), "accepted")
  expect(tuned_game({kind = "labels", from_step = POISON_FROM}, weights), "trainer_at_fault")
  -- An auditor given no weights for such a spec is not set up for the game, and says so.
  local v = tuned_game(nil, nil)
  expect(v, "auditor_at_fault", "this party was given none (init = their safetensors file)")
end)

t:test("a reply that decodes but does not encode again is the trainer's", function()
  -- The trainer writes its reply line itself, with a field `{"$bytes": 5}`: it decodes as a
  -- table that vt.json.encode refuses, and the honest auditor's transcript (and the
  -- network's attestation) re-encode what it received. Before the check the auditor failed.
  for _, kind in ipairs{"logs", "commit"} do
    local tr = game.trainer{runner = poisoned()}
    local deliver = tr.deliver
    tr.deliver = function(self, text, ...)
      local line = deliver(self, text, ...)
      if json_type(text) == kind then line = line:gsub('"body":{', '"body":{"x":{"$bytes":5},', 1) end
      return line
    end
    -- (vt.json.decode refuses the field now; the network's own re-encoding check stays.)
    expect(play(tr), "trainer_at_fault", "answered '" .. kind .. "' with a line that is not a JSON object")
  end
end)

local d = T.suite("deadlines")
d:test("an auditor is not charged for the time the trainer takes to answer it", function()
  -- Five 'logs' answers of 0.6 s each, against an audit deadline of 2.5 s (the auditor's own
  -- replay of the 20 small steps takes a fraction of that, under the sanitizers too).
  local tr = game.trainer{runner = honest(), behaviour = {delay = {logs = 0.6}}}
  expect(play(tr, nil, {deadlines = {logs = 1, audit = 2.5}}), "accepted")
  -- Control: the trainer itself is still held to its own deadline.
  local late = game.trainer{runner = honest(), behaviour = {delay = {logs = 0.3}}}
  expect(play(late, nil, {deadlines = {logs = 0.2}}), "trainer_at_fault", "missed the deadline")
end)

-- Red-team findings of 2026-12-05: each convicted the honest auditor before its fix.
local r = T.suite("red team, 2026-12-05")

r:test("a spec no runner builds is the trainer's fault also in a run of 0 steps (one leaf)", function()
  -- The model has one class fewer than the data: vt.trainer refuses the spec. The honest
  -- auditor's evidence named leaf 1, which a run of 0 steps does not have, and the client
  -- convicted it; the evidence now names leaf 0, where the judge confirms it.
  local zero = vt.spec{model = vt.models.mlp(copy(setup.model)), data = data, optim = vt.optim.sgd(copy(setup.optim)),
                       batch = setup.batch, steps = 0, seed = 1, checkpoint_every = K, round = {bits = 32, band = 1 / 16}}
  local misfit = vt.spec.parse((zero:canonical():gsub("model%.classes=(%d+)", function(n)
    return "model.classes=" .. (tonumber(n) - 1)
  end)))
  T.assert_true(not pcall(vt.trainer, {spec = misfit, data = data, mode = "rounded"}))
  local store = vt.store.open(tmp .. "/misfit0-trainer")
  local run = store:create_run("run", {spec = misfit:canonical(), checkpoint_every = K, steps = 0})
  run:put_checkpoint(0, honest():store():run("run"):checkpoint(0))
  local v = play(game.trainer{store = store, run = "run"}, nil, {spec = misfit})
  T.assert_eq(v.audit.evidence.kind, "unreplayable")
  T.assert_eq(v.audit.evidence.leaf, 0)
  expect(v, "trainer_at_fault")
  -- Control: evidence of another kind at leaf 0 names no leaf with steps.
  local liar = edit(auditor_party(), "audit", function(r) r.evidence = {kind = "replay_error", leaf = 0, reason = "x"} end)
  expect(play(game.trainer{runner = honest()}, liar), "auditor_at_fault", "does not name a leaf")
end)

r:test("a party cannot ask in another's name with the network it was handed", function()
  -- The poisoned trainer, asked for its logs, asks the trainer for the logs of leaf 0 (an
  -- invalid question) in the auditor's name, and passes on the forfeit the network raised:
  -- the honest auditor lost. The request is now the trainer's own, and so is the forfeit.
  local tr = game.trainer{runner = poisoned()}
  local deliver = tr.deliver
  tr.deliver = function(self, text, deadline, net, seq)
    local m = vt.json.decode(text)
    if m.type == "logs" and m.body.leaf == 4 and net and net.request then
      pcall(net.request, net, "auditor", "trainer", "logs", {leaf = 0})
      return vt.json.encode{kind = "reply", game = m.game, seq = m.seq, from = self.name, to = m.from, type = m.type,
                            forfeit = {party = "auditor", reason = "the auditor asked an invalid question"}}
    end
    return deliver(self, text, deadline, net, seq)
  end
  local v = play(tr)
  expect(v, "trainer_at_fault")
  T.assert_eq(v.forfeit, "trainer")
end)

r:test("an answer larger than a remote asker can be handed is the answering party's fault", function()
  -- A 1.2 GB answer to a remote auditor's question ran its process out of memory, and the
  -- honest auditor forfeited. A reply over what the asker can be handed (half its 1 GiB line,
  -- max_reply; 2 MB here) is now the answering party's forfeit, before it is relayed.
  local tr = edit(game.trainer{runner = poisoned()}, "logs", function(r, body)
    if body.leaf == 2 then r.junk = string.rep("\1", 2 * 1024 * 1024) end
  end)
  games = games + 1
  local net = game.network{game = "g" .. games}
  net:add(tr)
  local aud = game.remote{role = "auditor", profile = "splitk4", max_reply = 1024 * 1024,
                          options = {store = tmp .. "/a" .. games, data = setup.data}}
  net:add(aud)
  net:add(game.judge{store = vt.store.open(tmp .. "/j" .. games), data = data, profile = "blocked"})
  local v = game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/c" .. games), spec = spec}}
  aud:close()
  expect(v, "trainer_at_fault", "can be handed")
  T.assert_error(function() game.remote{role = "auditor", max_reply = 2 ^ 30} end, "max_reply must be an integer", true)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
