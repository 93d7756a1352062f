-- The client party of vt.game and the game it drives (vt.game.play): the commitment, the
-- audit, bisection and the judge's decision when they disagree, the returned weights when
-- they agree.
local commitment = require "vt.game.commitment"
local party = require "vt.game.party"
local util = require "vt.util"
local wire = require "vt.game.wire"

local M = {}

-- The client receives the commitment and the returned weights.
local Client = setmetatable({}, {__index = party.Party})
Client.__index = Client

function M.new(options)
  options = util.check_options("vt.game.client", options, {"store", "name"})
  local self = setmetatable(party.new("client", options.name, options.store), Client)
  return self
end

-- ---------------------------------------------------------------------------------------
-- The game.

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
  if client == nil then error("vt.game.play: option 'client' is required (vt.game.client{store=})", 2) end
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
    local audit_request = {trainer = "trainer", game = net.game}
    for key, v in pairs(commit) do audit_request[key] = v end
    local audit = net:request(client.name, "auditor", "audit", audit_request)
    verdict.audit = audit
    verdict.auditor_root = audit.root
    event("audit", audit)

    local disputed = nil
    if audit.root ~= commit.root or audit.n_leaves ~= commit.n_leaves then
      local b = net:request(client.name, "auditor", "bisect", {trainer = "trainer"})
      verdict.rounds = b.rounds
      if b.bad_answer then
        verdict.interval = {leaf = b.first_differing}
        return finish("trainer_at_fault", "the trainer's answer in bisection did not verify: " .. b.bad_answer)
      end
      disputed = b.first_differing
      event("bisect", b)
    end
    local ev = audit.evidence
    if ev and ev ~= vt.json.null and (disputed == nil or ev.leaf < disputed) then disputed = ev.leaf end

    if disputed == nil then
      -- Accepted so far: the client checks the returned weights against the last leaf.
      local w = net:request(client.name, "trainer", "weights", {})
      local okleaf, why = commitment.verify_leaf(w.leaf, commit.spec_hash, commit.n_leaves, commit.root)
      if okleaf and w.leaf.index ~= commit.n_leaves - 1 then okleaf, why = false, "not the last leaf" end
      if okleaf and vt.store.sha256(w.checkpoint) ~= w.leaf.state_digest then
        okleaf, why = false, "the returned weights do not match the state digest of the last leaf"
      end
      if not okleaf then
        local first, last = commitment.interval(commit.n_leaves - 1, commit.checkpoint_every, commit.steps)
        verdict.interval = {leaf = commit.n_leaves - 1, first_step = first, last_step = last}
        return finish("trainer_at_fault", why)
      end
      verdict.weights = {state_digest = w.leaf.state_digest, bytes = #w.checkpoint}
      verdict.checkpoint = w.checkpoint
      return finish("accepted", "the auditor's replay gives the committed root, with no illegitimate entries")
    end

    local first, last = commitment.interval(disputed, commit.checkpoint_every, commit.steps)
    verdict.interval = {leaf = disputed, first_step = first or 0, last_step = last or 0}
    event("dispute", verdict.interval)
    local judged = net:request(client.name, "judge", "adjudicate", {
      spec = commit.spec, spec_hash = commit.spec_hash, root = commit.root, n_leaves = commit.n_leaves, leaf = disputed,
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
