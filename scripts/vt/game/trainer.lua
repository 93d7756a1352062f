-- The trainer party of vt.game: answers the other parties from its committed run (a
-- complete vt.trainer run in its store), and can play the protocol-level cheats of
-- PROTOCOL.md's scenarios (`behaviour`, below).
local commitment = require "vt.game.commitment"
local party = require "vt.game.party"
local util = require "vt.util"

local M = {}

-- behaviour (the protocol-level cheats of PROTOCOL.md's scenarios):
--   refuse = {type = true}      refuse these requests ("logs", "leaf", "handover", "weights")
--   delay = {type = seconds}    answer late
--   rewrite_logs = {step = s}   disclose step s's records with one logged direction flipped
--   withhold_record = {step = s}  disclose step s without one of its records (the first
--                               that holds a logged entry)
--   replay_record = {step = s, from = t}  disclose step s with one record (the first whose
--                               bytes differ) replaced by step t's record of the same boundary
--                               and call
--   leaves_from = run           answer every `leaf` request (bisection, judge) from another
--                               run's tree (a store run object, e.g. the honest run's): leaves
--                               and proofs inconsistent with the commitment
--   substitute_weights = true   return other weights than the last leaf's
local Trainer = setmetatable({}, {__index = party.Party})
Trainer.__index = Trainer

function M.new(options)
  options = util.check_options("vt.game.trainer", options, {"runner", "store", "run", "name", "behaviour"})
  local store, run_id = options.store, options.run or "run"
  if options.runner then store, run_id = options.runner:store(), options.runner:run_id() end
  local self = setmetatable(party.new("trainer", options.name, store, options.behaviour), Trainer)
  self.run = store:run(run_id)
  if self.run == nil then error("vt.game.trainer: store '" .. store:path() .. "' has no run '" .. run_id .. "'", 2) end
  if not self.run:info().complete then error("vt.game.trainer: run '" .. run_id .. "' is not complete; train it first", 2) end
  self.handlers = {commit = Trainer.on_commit, logs = Trainer.on_logs, leaf = Trainer.on_leaf,
                   handover = Trainer.on_handover, weights = Trainer.on_weights}
  return self
end

function Trainer:info() return self.run:info() end

function Trainer:on_commit()
  local info = self.run:info()
  return {spec = self.run:spec(), spec_hash = info.spec_hash, n_leaves = info.leaves, root = self.run:root(),
          checkpoint_every = info.checkpoint_every, steps = info.steps}
end

-- Flips the first logged direction of a record (DOWN <-> UP), as a trainer rewriting its logs would.
local function flip_first_direction(value)
  local flipped = vt.log.decode(value):flipped()
  return flipped and flipped:encode() or nil
end

function Trainer:steps_of(leaf)
  local info = self.run:info()
  local first, last = commitment.interval(leaf, info.checkpoint_every, info.steps)
  local steps = {}
  if first == nil then return steps end
  for s = first, last do
    local records = self.run:step(s)
    local rewrite = self.behaviour.rewrite_logs
    if rewrite and rewrite.step == s then
      for _, r in ipairs(records) do
        local flipped = r.boundary ~= "~trace" and flip_first_direction(r.value)
        if flipped then r.value = flipped break end
      end
    end
    local withhold = self.behaviour.withhold_record
    if withhold and withhold.step == s then
      local chosen
      for i, r in ipairs(records) do
        if r.boundary ~= "~trace" then
          local c = vt.log.decode(r.value):counts()
          if chosen == nil or c.down + c.up + c.exact > 0 then chosen = i end
          if c.down + c.up + c.exact > 0 then break end
        end
      end
      if chosen then table.remove(records, chosen) end
    end
    local replay = self.behaviour.replay_record
    if replay and replay.step == s then
      local other = {}
      for _, r in ipairs(self.run:step(replay.from)) do other[r.boundary .. "#" .. r.call] = r.value end
      for _, r in ipairs(records) do
        local v = r.boundary ~= "~trace" and other[r.boundary .. "#" .. r.call]
        if v and v ~= r.value then r.value = v break end
      end
    end
    steps[#steps + 1] = {step = s, records = records}
  end
  return steps
end

function Trainer:leaf_message(i, run)
  run = run or self.run
  local info = run:leaf_info(i)
  if info == nil then error("no leaf " .. tostring(i) .. " (the run has " .. run:size() .. ")") end
  return {index = i, leaf = info.leaf, state_digest = info.state_digest, log_digest = info.log_digest,
          proof = run:prove(i)}
end

function Trainer:on_logs(body)
  return {leaf = self:leaf_message(body.leaf), steps = self:steps_of(body.leaf)}
end

function Trainer:on_leaf(body)
  local run = self.behaviour.leaves_from or self.run
  local m = self:leaf_message(body.index, run)
  local n = run:size()
  m.prefix_root = run:root(body.index + 1)
  m.consistency = run:consistency(body.index + 1, n)
  return m
end

function Trainer:on_handover(body)
  local j = body.leaf
  local out = {leaf = j, steps = self:steps_of(j)}
  if j > 0 then out.checkpoint = self.run:checkpoint(j - 1) end
  return out
end

function Trainer:on_weights()
  local last = self.run:size() - 1
  local checkpoint = self.run:checkpoint(last)
  if self.behaviour.substitute_weights then
    -- Other weights: every float32 entry nudged by one unit in the last place of its first value.
    local entries = vt.store.checkpoint_decode(checkpoint)
    for _, e in ipairs(entries) do
      if e.dtype == "float32" and #e.data >= 4 then
        local b = e.data:byte(1)
        e.data = string.char((b + 1) % 256) .. e.data:sub(2)
      end
    end
    checkpoint = vt.store.checkpoint_encode(entries)
  end
  return {leaf = self:leaf_message(last), checkpoint = checkpoint}
end

return M
