-- The client party of vt.game and the game it drives (vt.game.play): the commitment, the
-- audit, bisection and the judge's decision when they disagree, the returned weights when
-- they agree.
local commitment = require "vt.game.commitment"
local party = require "vt.game.party"
local util = require "vt.util"
local wire = require "vt.game.wire"

local M = {}

-- The client ordered the training: it holds the spec (a vt.spec or its canonical text) and
-- judges the commitment against it, receives the returned weights, and settles what the
-- auditor claims of the trainer's answers against the network's attestations.
local Client = setmetatable({}, {__index = party.Party})
Client.__index = Client

function M.new(options)
  options = util.check_options("vt.game.client", options, {"store", "name", "spec"})
  local spec = options.spec
  if spec == nil then
    error("vt.game.client: option 'spec' is required (the spec the client ordered: a vt.spec or its canonical text)", 2)
  end
  local text = spec
  if type(spec) ~= "string" then
    local ok, canonical = pcall(function() return spec:canonical() end)
    if not ok then error("vt.game.client: option 'spec' must be a vt.spec or its canonical text, got " .. type(spec), 2) end
    text = canonical
  end
  local ok, parsed = pcall(vt.spec.parse, text)
  if not ok then error("vt.game.client: option 'spec' does not parse: " .. tostring(parsed), 2) end
  local self = setmetatable(party.new("client", options.name, options.store), Client)
  self.spec_text, self.spec_hash = parsed:canonical(), parsed:hash()
  return self
end

-- ---------------------------------------------------------------------------------------
-- The game.

-- Whether `ev` (the auditor's evidence) names a leaf of the run that has steps, or leaf 0 for a
-- spec no runner builds (the judge confirms that on leaf 0; a run of 0 steps has no other).
local function evidence_leaf_ok(ev, n_leaves)
  if type(ev) ~= "table" or type(ev.kind) ~= "string" or not wire.is_int(ev.leaf) then return false end
  return ev.leaf >= (ev.kind == "unreplayable" and 0 or 1) and ev.leaf < n_leaves
end

-- Plays the whole game; returns the verdict table:
--   outcome ("accepted", "trainer_at_fault", "auditor_at_fault", "inconclusive"), reason,
--   interval = {leaf, first_step, last_step} (when a leaf was disputed), rounds, root, auditor_root,
--   evidence, judge_leaf, trainer_leaf, auditor_leaf, proofs, judge_seconds, audit, messages.
function M.play(options)
  options = util.check_options("vt.game.play", options, {"network", "client", "trainer", "auditor", "judge", "game", "deadlines", "on_event"})
  local net = options.network
  if net == nil then
    net = wire.network{game = options.game, deadlines = options.deadlines}
    for _, p in ipairs{options.trainer, options.auditor, options.judge} do net:add(p) end
  end
  local client = options.client or net:party("client")
  if client == nil then error("vt.game.play: option 'client' is required (vt.game.client{store=, spec=})", 2) end
  if net:party(client.name) == nil then net:add(client) end
  local names = {trainer = "trainer", auditor = "auditor", judge = "judge"}
  for role, name in pairs(names) do
    if net:party(name) == nil then error("vt.game.play: the network has no party named '" .. name .. "' (" .. role .. ")", 2) end
  end
  local event = options.on_event or function() end
  local verdict = {rounds = 0}
  local t0 = vt.clock()

  local function finish(outcome, reason)
    verdict.outcome = verdict.outcome or outcome
    verdict.reason = verdict.reason or reason
    verdict.seconds = vt.clock() - t0
    verdict.messages = #net.log
    client:record(net.game, {kind = "verdict", game = net.game, from = client.name, body = wire.summarize(verdict)})
    event("verdict", verdict)
    return verdict
  end

  local ok, result = pcall(function()
    local commit = net:request(client.name, "trainer", "commit", {})
    verdict.root, verdict.n_leaves, verdict.spec_hash = commit.root, commit.n_leaves, commit.spec_hash
    event("commit", commit)
    -- The commitment must be to the spec the client ordered, and fit it.
    if commit.spec_hash ~= client.spec_hash or vt.store.sha256(commit.spec) ~= client.spec_hash then
      return finish("trainer_at_fault", "the trainer committed to another spec (hash " .. commit.spec_hash ..
                    ") than the client's (" .. client.spec_hash .. ")")
    end
    local c, misfit = commitment.of_spec(client.spec_text, commit.root, commit.n_leaves)
    if c == nil then return finish("trainer_at_fault", "the trainer's commitment does not fit the spec: " .. misfit) end
    if commit.checkpoint_every ~= c.k or commit.steps ~= c.n then
      return finish("trainer_at_fault", string.format(
        "the trainer's commitment claims %d steps with checkpoints every %d; the spec says %d and %d",
        commit.steps, commit.checkpoint_every, c.n, c.k))
    end
    local function interval_of(leaf)
      local first, last = commitment.interval(leaf, c.k, c.n)
      return {leaf = leaf, first_step = first or 0, last_step = last or 0}
    end

    -- A claim of the auditor that the trainer's answer to its question (`type_`, for leaf
    -- `index`) did not verify: the network's attestation says whether the trainer gave that
    -- answer to that question; the client checks the answer itself.
    local function settle(claim, type_, index)
      verdict.interval = interval_of(index)
      local record = wire.is_int(claim.seq) and net:attested(claim.seq) or nil
      local asked = record and record.request and (type_ == "logs" and record.request.leaf or record.request.index)
      if record == nil or record.from ~= "trainer" or record.to ~= "auditor" or record.type ~= type_ or asked ~= index then
        return finish("auditor_at_fault", "the auditor claims a bad answer to '" .. type_ .. "' for leaf " .. index ..
                      " that the network did not carry from the trainer to it")
      end
      if wire.body_digest(claim.answer) ~= record.digest then
        return finish("auditor_at_fault", "the answer the auditor shows for '" .. type_ .. "' of leaf " .. index ..
                      " is not the one the trainer gave it (network seq " .. claim.seq .. ")")
      end
      local good, why
      if type_ == "logs" then
        good, why = commitment.check_logs_answer(claim.answer, c, index)
      else
        good, why = commitment.check_leaf_answer(claim.answer, c, index)
      end
      if good then
        return finish("auditor_at_fault", "the auditor claims that the trainer's answer to '" .. type_ .. "' for leaf " ..
                      index .. " does not verify, but it does")
      end
      verdict.evidence = {kind = "bad_answer", type = type_, leaf = index, seq = claim.seq, reason = why}
      local what = type_ == "logs" and "the trainer's logs of leaf " .. index or "the trainer's answer in bisection"
      return finish("trainer_at_fault", what .. " did not verify: " .. why .. " (the network attests the answer, seq " ..
                    claim.seq .. ")")
    end

    local audit_request = {trainer = "trainer", game = net.game, spec = client.spec_text, spec_hash = c.spec_hash,
                           n_leaves = c.n_leaves, root = c.root, checkpoint_every = c.k, steps = c.n}
    local audit = net:request(client.name, "auditor", "audit", audit_request)
    verdict.audit = audit
    verdict.auditor_root = audit.root
    event("audit", audit)
    local ev = audit.evidence
    if ev == vt.json.null then ev = nil end
    if ev ~= nil then
      if not evidence_leaf_ok(ev, c.n_leaves) then
        return finish("auditor_at_fault", "the auditor's evidence does not name a leaf of the run with steps (1.." ..
                      (c.n_leaves - 1) .. "; 0.. for an unreplayable spec)")
      end
      if ev.kind == "bad_answer" then return settle(ev, "logs", ev.leaf) end
    end

    local disputed = nil
    if audit.root ~= commit.root or audit.n_leaves ~= commit.n_leaves then
      local b = net:request(client.name, "auditor", "bisect", {trainer = "trainer", spec_hash = c.spec_hash,
                                                                 n_leaves = c.n_leaves, root = c.root})
      verdict.rounds = b.rounds
      if not (wire.is_int(b.first_differing) and b.first_differing < c.n_leaves) then
        return finish("auditor_at_fault", "the auditor's root differs from the commitment, but its bisection names " ..
                      "no leaf of the run")
      end
      if b.bad_answer then return settle(b, "leaf", b.first_differing) end
      disputed = b.first_differing
      event("bisect", b)
    end
    if ev and (disputed == nil or ev.leaf < disputed) then disputed = ev.leaf end

    if disputed == nil then
      -- Accepted so far: the client checks the returned weights against the last leaf.
      local w = net:request(client.name, "trainer", "weights", {})
      local okleaf, why = commitment.verify_leaf(w.leaf, c.spec_hash, c.n_leaves, c.root, c.n_leaves - 1)
      if okleaf and vt.store.sha256(w.checkpoint) ~= w.leaf.state_digest then
        okleaf, why = false, "the returned weights do not match the state digest of the last leaf"
      end
      if not okleaf then
        verdict.interval = interval_of(c.n_leaves - 1)
        return finish("trainer_at_fault", why)
      end
      verdict.weights = {state_digest = w.leaf.state_digest, bytes = #w.checkpoint}
      verdict.checkpoint = w.checkpoint
      return finish("accepted", "the auditor's replay gives the committed root, with no illegitimate entries")
    end

    verdict.interval = interval_of(disputed)
    event("dispute", verdict.interval)
    local judged = net:request(client.name, "judge", "adjudicate", {
      spec = client.spec_text, spec_hash = c.spec_hash, root = c.root, n_leaves = c.n_leaves, leaf = disputed,
      auditor_root = audit.root, auditor_leaves = audit.n_leaves, trainer = "trainer", auditor = "auditor",
      evidence = ev})
    for key, v in pairs(judged) do verdict[key] = v end
    return finish(judged.outcome, judged.reason)
  end)
  if ok then return result end
  if wire.is_forfeit(result) then
    local loser = net:party(result.forfeit)
    local role = loser and loser.kind or result.forfeit
    verdict.forfeit = result.forfeit
    if role == "trainer" then return finish("trainer_at_fault", tostring(result)) end
    if role == "auditor" then return finish("auditor_at_fault", tostring(result)) end
    return finish("inconclusive", tostring(result))
  end
  error(result, 0)
end

return M
