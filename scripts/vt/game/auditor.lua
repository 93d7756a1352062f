-- The auditor party of vt.game: replays the trainer's disclosed run on its own profile (a
-- vt.auditor run in its store, named after the game), reports the root it finds with its
-- evidence, and finds the first differing leaf by bisection over prefix roots.
local commitment = require "vt.game.commitment"
local party = require "vt.game.party"
local util = require "vt.util"

local M = {}

-- behaviour: refuse / delay as for the trainer; lie_from_leaf = L (claims other leaves from
-- leaf L on, in its root, in bisection and in answers).
local Auditor = setmetatable({}, {__index = party.Party})
Auditor.__index = Auditor

function M.new(options)
  options = util.check_options("vt.game.auditor", options, {"store", "data", "profile", "name", "behaviour", "progress", "init"})
  if options.data == nil then error("vt.game.auditor: option 'data' is required (a data set or a recipe)", 2) end
  local self = setmetatable(party.new("auditor", options.name, options.store, options.behaviour), Auditor)
  self.data = party.data(options.data)
  self.profile = options.profile or "native"
  self.progress = options.progress
  self.init = options.init  -- initial weights, for specs that start from imported ones
  self.handlers = {audit = Auditor.on_audit, bisect = Auditor.on_bisect, leaf = Auditor.on_leaf}
  return self
end

-- The leaves this auditor claims (its own, or lies from leaf L on).
function Auditor:claimed_leaves()
  local leaves = {}
  if self.run == nil then return leaves end  -- no replay (the spec could not be replayed)
  for i = 0, self.run:size() - 1 do leaves[i + 1] = self.run:leaf(i) end
  local lie = self.behaviour.lie_from_leaf
  if lie then
    for i = lie, #leaves - 1 do leaves[i + 1] = vt.store.sha256("a different leaf " .. i) end
  end
  return leaves
end

function Auditor:on_audit(body)
  -- Every check comes before any state changes: a refused audit leaves this auditor as it was.
  local c, why = commitment.of_spec(body.spec, body.root, body.n_leaves)
  if c == nil then error("the commitment does not fit its spec: " .. why) end
  if c.spec_hash ~= body.spec_hash then error("the disclosed spec does not hash to the committed spec_hash") end
  local game_id = body.game or "game"
  -- A replay left from an earlier game of this id would be resumed without re-checking its
  -- logs, and its evidence is gone: refuse it rather than vouch for what was not checked.
  if self.store:run(game_id) ~= nil then
    error("this auditor's store already holds a replay for game '" .. tostring(body.game) ..
          "'; play each game under a new id (vt.game.network{game = ...}) or with a fresh store")
  end
  self.runner, self.run = nil, nil
  local okrunner, runner = pcall(vt.auditor, {spec = c.spec, data = self.data, store = self.store, run = game_id,
                                              profile = self.profile, logs = "given",
                                              init = c.spec:get("model.init") and self.init or nil})
  if not okrunner then
    -- Without the spec's inputs this auditor cannot audit (its own failing). With them, the
    -- spec itself cannot be replayed: no honest trainer could have committed a run of it,
    -- which is evidence against the trainer (the judge builds the same runner to confirm it,
    -- on leaf 0: a run of 0 steps has no other).
    local missing, what = party.missing_inputs(c.spec, self.data, self.init)
    -- (A data set of the spec's name with another digest: this auditor's copy or the spec's
    -- digest is wrong, and only the judge's copy can tell which; an auditor that holds other
    -- data than the spec names is not set up for this game.)
    if missing and (what ~= "data" or self.data:name() ~= c.spec:get("data.name")) then
      error("this auditor cannot replay the spec: " .. missing)
    end
    return {root = commitment.merkle.root({}), n_leaves = 0, per_step = {}, profile = self.profile, seconds = 0,
            totals = {corrections = 0, illegitimate = 0, near_misses = 0, log_mismatches = 0, logged = 0, elements = 0,
                      steerable = 0, steps = 0},
            evidence = {kind = "unreplayable", leaf = 0, reason = missing or tostring(runner)}}
  end
  self.runner = runner
  self.run = self.store:run(game_id)
  local totals = {corrections = 0, illegitimate = 0, near_misses = 0, log_mismatches = 0, logged = 0, elements = 0,
                  steerable = 0, steps = 0}
  local per_step = {}  -- {step, logged, steerable, illegitimate} of every replayed step
  local evidence
  local t0 = vt.clock()
  for leaf = 1, c.n_leaves - 1 do
    local answer, seq = self:request(body.trainer, "logs", {leaf = leaf})
    local ok, bad = commitment.check_logs_answer(answer, c, leaf)
    if not ok then
      -- The trainer's answer itself is the evidence: the network attests it by `seq`, so the
      -- client can check the claim without taking this auditor's word (client.lua).
      evidence = {kind = "bad_answer", type = "logs", leaf = leaf, seq = seq, answer = answer, reason = bad}
      break
    end
    for _, s in ipairs(answer.steps) do
      local okstep, report = pcall(self.runner.step, self.runner, s.records)
      if not okstep then
        evidence = evidence or {kind = "replay_error", leaf = leaf, step = s.step, reason = tostring(report)}
        break
      end
      for key in pairs(totals) do totals[key] = totals[key] + (report[key] or 0) end
      totals.steps = totals.steps + 1
      per_step[#per_step + 1] = {step = s.step, logged = report.logged, steerable = report.steerable,
                                 illegitimate = report.illegitimate}
      if evidence == nil and (report.illegitimate > 0 or report.log_mismatches > 0) then
        local where = {}
        for name, b in pairs(report.boundaries) do
          if b.illegitimate > 0 then where[#where + 1] = {boundary = name, illegitimate = b.illegitimate} end
        end
        table.sort(where, function(x, y) return x.boundary < y.boundary end)
        evidence = {kind = report.illegitimate > 0 and "illegitimate" or "log_mismatch", leaf = leaf, step = s.step,
                    illegitimate = report.illegitimate, log_mismatches = report.log_mismatches,
                    log_mismatch = report.log_mismatch, boundaries = where}
      end
      if self.progress then io.stderr:write(string.format("\r  auditor: step %d/%d", s.step, c.n)) end
    end
    if evidence and evidence.kind == "replay_error" then break end
  end
  if self.progress then io.stderr:write("\n") end
  local leaves = self:claimed_leaves()
  return {root = commitment.merkle.root(leaves), n_leaves = #leaves, totals = totals, per_step = per_step, evidence = evidence,
          seconds = vt.clock() - t0, profile = self.profile}
end

function Auditor:on_leaf(body)
  local leaves = self:claimed_leaves()
  local i = body.index
  if i < 0 or i >= #leaves then error("no leaf " .. i .. " (this auditor holds " .. #leaves .. ")") end
  local info = self.run:leaf_info(i)
  local m = {index = i, leaf = leaves[i + 1], proof = commitment.merkle.prove(leaves, i), n_leaves = #leaves,
             root = commitment.merkle.root(leaves)}
  if info and info.leaf == m.leaf then
    m.state_digest, m.log_digest = info.state_digest, info.log_digest
  end
  return m
end

-- Bisection over prefix roots: leaf m "agrees" when the trainer's tree of the first m + 1
-- leaves has this auditor's root of them (proved against the committed root by a
-- consistency proof, the leaf itself by an inclusion proof). Agreement holds for a prefix and
-- fails after it, so ceil(log2(n)) queries find the first differing leaf j. The commitment
-- comes with the request (the client's), not from this auditor's memory of the audit.
-- An answer that does not verify ends the bisection with the answer and its attestation.
function Auditor:on_bisect(body)
  local c = {spec_hash = body.spec_hash, n_leaves = body.n_leaves, root = body.root}
  local n = c.n_leaves
  local mine = self:claimed_leaves()
  local function agrees(m)
    if m + 1 > #mine then return false, nil end
    local answer, seq = self:request(body.trainer, "leaf", {index = m})
    local ok, why = commitment.check_leaf_answer(answer, c, m)
    if not ok then error({bad_answer = why, index = m, seq = seq, answer = answer}) end
    return answer.prefix_root == commitment.merkle.root(mine, m + 1), answer
  end
  local lo, hi, rounds = -1, n - 1, 0
  if #mine == n and commitment.merkle.root(mine) == c.root then return {agreed = true, rounds = 0} end
  while hi - lo > 1 do
    local mid = math.floor((lo + hi) / 2)
    rounds = rounds + 1
    local ok, agree = pcall(agrees, mid)
    if not ok then
      if type(agree) == "table" and agree.bad_answer then
        return {first_differing = mid, rounds = rounds, bad_answer = agree.bad_answer, seq = agree.seq,
                answer = agree.answer}
      end
      error(agree, 0)
    end
    if agree then lo = mid else hi = mid end
  end
  return {first_differing = hi, rounds = rounds}
end

return M
