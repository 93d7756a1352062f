-- The judge party of vt.game: replays the one disputed interval on its own profile, from
-- the trainer's hand-over, and decides who is at fault.
local commitment = require "vt.game.commitment"
local party = require "vt.game.party"
local util = require "vt.util"
local wire = require "vt.game.wire"

local M = {}

local Judge = setmetatable({}, {__index = party.Party})
Judge.__index = Judge

function M.new(options)
  options = util.check_options("vt.game.judge", options, {"store", "data", "profile", "name", "init"})
  if options.data == nil then error("vt.game.judge: option 'data' is required (a data set or a recipe)", 2) end
  local self = setmetatable(party.new("judge", options.name, options.store), Judge)
  self.data = party.data(options.data)
  self.profile = options.profile or "native"
  self.init = options.init  -- initial weights, for specs that start from imported ones
  self.handlers = {adjudicate = Judge.on_adjudicate}
  return self
end

-- body: {spec, spec_hash, root (the trainer's committed root), n_leaves, leaf = j,
--        auditor_root, auditor_leaves, trainer = name, auditor = name, evidence}
function Judge:on_adjudicate(body)
  local t0 = vt.clock()
  local j = body.leaf
  local verdict = {leaf = j, judge_profile = self.profile, evidence = {}}
  local function decide(outcome, reason)
    verdict.outcome, verdict.reason = outcome, reason
    verdict.judge_seconds = vt.clock() - t0
    return verdict
  end
  local c, misfit = commitment.of_spec(body.spec, body.root, body.n_leaves)
  if c == nil then return decide("inconclusive", "the request's commitment does not fit its spec: " .. misfit) end
  if c.spec_hash ~= body.spec_hash then return decide("inconclusive", "the spec does not hash to spec_hash") end
  if not (wire.is_int(j) and j < c.n_leaves) then
    return decide("inconclusive", "the request names leaf " .. tostring(j) .. ", outside the run (0.." .. (c.n_leaves - 1) .. ")")
  end
  local spec = c.spec
  local first, last = commitment.interval(j, c.k, c.n)
  verdict.interval = {leaf = j, first_step = first or 0, last_step = last or 0}

  -- The trainer's leaves j and j-1, proved against its committed root at those indices.
  local trainer_leaf = self:request(body.trainer, "leaf", {index = j})
  local ok, why = commitment.verify_leaf(trainer_leaf, c.spec_hash, c.n_leaves, c.root, j)
  if not ok then return decide("trainer_at_fault", "the trainer's leaf " .. j .. ": " .. why) end
  verdict.trainer_leaf = trainer_leaf.leaf
  verdict.proofs = {trainer = trainer_leaf.proof}
  local agreed
  if j > 0 then
    agreed = self:request(body.trainer, "leaf", {index = j - 1})
    ok, why = commitment.verify_leaf(agreed, c.spec_hash, c.n_leaves, c.root, j - 1)
    if not ok then return decide("trainer_at_fault", "the trainer's leaf " .. (j - 1) .. ": " .. why) end
  end
  -- The hand-over: checkpoint of leaf j-1 and the logs of interval j (exactly its steps; none
  -- for leaf 0), each checked against the leaves.
  local handover = self:request(body.trainer, "handover", {leaf = j})
  if j > 0 and type(handover.checkpoint) ~= "string" then
    return decide("trainer_at_fault", "the hand-over of leaf " .. j .. " carries no checkpoint of leaf " .. (j - 1))
  end
  if j > 0 and vt.store.sha256(handover.checkpoint) ~= agreed.state_digest then
    return decide("trainer_at_fault", "the handed-over checkpoint does not match the state digest of agreed leaf " .. (j - 1))
  end
  ok, why = commitment.check_steps(handover.steps, j, c, trainer_leaf.log_digest)
  if not ok then return decide("trainer_at_fault", "the hand-over of leaf " .. j .. ": " .. why) end
  local log_digest = trainer_leaf.log_digest

  -- The auditor's leaves j and j-1, proved against the root it reported. An auditor whose
  -- replay stopped (a failed replay) holds no leaf j.
  local auditor_leaves = wire.is_int(body.auditor_leaves) and body.auditor_leaves or 0
  local function auditor_leaf_at(i)
    local m = self:request(body.auditor, "leaf", {index = i})
    local okp, inside = pcall(vt.merkle.verify, m.leaf, i, auditor_leaves, m.proof, body.auditor_root)
    if not (okp and inside) then return nil end
    return m
  end
  if j < auditor_leaves then
    local auditor_leaf = auditor_leaf_at(j)
    if auditor_leaf == nil then
      return decide("auditor_at_fault", "the auditor's leaf " .. j .. " is not in the root it reported")
    end
    verdict.auditor_leaf = auditor_leaf.leaf
    verdict.proofs.auditor = auditor_leaf.proof
  end
  if j > 0 then
    local auditor_prev = j - 1 < auditor_leaves and auditor_leaf_at(j - 1) or nil
    if auditor_prev == nil then
      return decide("auditor_at_fault", "the auditor's leaf " .. (j - 1) .. " is not in the root it reported")
    end
    -- The trainer's leaf j-1 is its committed one (proved at that index), and bisection over
    -- committed prefixes finds the first leaf that differs: an auditor that disputes leaf j
    -- while it disagrees on leaf j-1 named the wrong leaf.
    if auditor_prev.leaf ~= agreed.leaf then
      return decide("auditor_at_fault", "the auditor disputes leaf " .. j .. ", but its leaf " .. (j - 1) ..
                    " already differs from the trainer's committed one: it named the wrong leaf")
    end
  end

  -- The replay of interval j (or the initial state for leaf 0).
  local okrunner, runner = pcall(vt.auditor, {
    spec = spec, data = self.data, profile = self.profile, logs = "given", init = spec:get("model.init") and self.init or nil,
    near_limit = true,
    start = j > 0 and {step = first - 1, checkpoint = handover.checkpoint} or nil})
  if not okrunner then
    verdict.evidence.replay_error = tostring(runner)
    local missing = party.missing_inputs(spec, self.data, self.init)
    if missing then return decide("inconclusive", "the judge cannot replay the spec: " .. missing) end
    -- The judge holds the spec's inputs, and the state it starts from is the agreed leaf's:
    -- a spec (or a committed state) no runner accepts is one no honest trainer ran.
    return decide("trainer_at_fault", "the judge cannot build the spec's run from its own inputs" ..
                  (j > 0 and " and the agreed checkpoint of leaf " .. (j - 1) or "") .. ": " .. tostring(runner) ..
                  "; no honest trainer commits a run of it")
  end
  local illegitimate, mismatches, near_limit, replay_error = 0, 0, 0, nil
  verdict.evidence.steps = {}
  for _, s in ipairs(handover.steps) do
    local okstep, report = pcall(runner.step, runner, s.records)
    if not okstep then replay_error = tostring(report) break end
    illegitimate = illegitimate + report.illegitimate
    mismatches = mismatches + report.log_mismatches
    near_limit = near_limit + report.near_limit
    if report.illegitimate > 0 or report.log_mismatches > 0 or report.divergence then
      local where = {}
      for name, b in pairs(report.boundaries) do
        if b.illegitimate > 0 then where[#where + 1] = name .. " (" .. b.illegitimate .. ")" end
      end
      table.sort(where)
      verdict.evidence.steps[#verdict.evidence.steps + 1] = {
        step = s.step, illegitimate = report.illegitimate, log_mismatches = report.log_mismatches,
        log_mismatch = report.log_mismatch, divergence = report.divergence, boundaries = where}
    end
  end
  verdict.evidence.illegitimate = illegitimate
  verdict.evidence.log_mismatches = mismatches
  verdict.evidence.near_limit = near_limit
  verdict.evidence.replay_error = replay_error
  verdict.replayed_steps = #handover.steps
  if replay_error == nil then
    local state_digest = vt.store.sha256(runner:checkpoint())
    verdict.judge_state_digest = state_digest
    verdict.judge_leaf = vt.store.leaf(body.spec_hash, j, state_digest, j > 0 and log_digest or commitment.ZERO)
  end
  if illegitimate > 0 then
    return decide("trainer_at_fault", illegitimate .. " illegitimate log entries in interval " .. j ..
                  ": entries no honest trainer writes (directions on the grid, beyond twice the window, or moving a " ..
                  "value from beyond the window, or EXACT " ..
                  "values out of reach of the replayed values)")
  end
  if mismatches > 0 then
    return decide("trainer_at_fault", "the trainer's logs do not fit the spec's computation in interval " .. j ..
                  " (" .. mismatches .. " mismatched records)")
  end
  if replay_error then return decide("inconclusive", "the judge's replay failed: " .. replay_error) end
  local matches_trainer = verdict.judge_leaf == verdict.trainer_leaf
  local matches_auditor = verdict.judge_leaf == verdict.auditor_leaf
  -- The auditor flagged entries that the judge's replay applies. Legitimacy is judged at each
  -- party's own values, which differ by the profiles' divergence: an entry in the outer part
  -- of the judge's window (between w/2 and w from its midpoint for one that moves a value,
  -- 1.5w and 2w for one that does not, the outer quarter of an EXACT entry's tolerance) may
  -- lie beyond the window at the auditor's, and a trainer that knows both profiles can write
  -- one there on purpose (THREAT_MODEL.md). The
  -- judge cannot tell which party is honest then. Where the profiles diverge by at most half
  -- the window, honest runs have no such entry, so a false alarm on them stays the auditor's.
  local claims_illegitimate = type(body.evidence) == "table" and body.evidence.kind == "illegitimate"
  if claims_illegitimate and matches_trainer and near_limit > 0 then
    return decide("inconclusive", "the auditor flags entries of interval " .. j .. " that the judge's replay " ..
                  "accepts, and " .. near_limit .. " of the entries it applies lie in the outer part of its window, " ..
                  "where an honest replay on other hardware may find them beyond it")
  end
  if verdict.auditor_leaf == nil then
    if matches_trainer then
      return decide("auditor_at_fault", "the auditor stopped before leaf " .. j .. "; the judge's replay gives the trainer's leaf")
    end
    return decide("trainer_at_fault", "the judge's replay of interval " .. j .. " does not give the trainer's leaf")
  end
  if matches_auditor and not matches_trainer then
    return decide("trainer_at_fault", "the judge's replay of interval " .. j .. " gives the auditor's leaf")
  elseif matches_trainer and not matches_auditor then
    return decide("auditor_at_fault", "the judge's replay of interval " .. j .. " gives the trainer's leaf: a false alarm")
  elseif matches_trainer and matches_auditor then
    -- The auditor disputed a leaf both parties hold alike on the strength of its own
    -- evidence, which the judge's replay does not bear out: a false alarm (PROTOCOL.md).
    return decide("auditor_at_fault", "both parties agree on leaf " .. j .. " and the judge's replay finds no " ..
                  "illegitimate entry and no record out of place: the auditor's evidence is a false alarm")
  end
  return decide("inconclusive", "the judge's replay of interval " .. j .. " matches neither party's leaf")
end

return M
