-- Which records a step's log holds (red team, 2026-12-05, second review): a model whose
-- boundaries depend on the batch (a head used only when one input value is positive) must
-- log, replay, check its window overrides and go through the game alike whichever steps
-- reach the branch; and a step's trace must name exactly the boundary calls the step made.
local T = require "vt.test"
local game = require "vt.game"
local suite = T.suite("log_structure")
local tmp = vt.fs.tmpdir("log-structure-test")

-- `extra` is computed every step (its input gradient's call is reserved in the forward) but
-- joins the output only when pixel 10 of the batch's first example is positive; with
-- `skip_head`, it is not computed at all then (its boundaries are not reached).
local function gated_source(skip_head)
  return [[
local nn = vt.nn
local M = nn.Module{kind = "Gated",
  init = function(self) self.fc1 = nn.Linear(64, 16); self.fc2 = nn.Linear(16, 4); self.extra = nn.Linear(16, 4) end,
  forward = function(self, x)
    local flat = nn.F.flatten(x)
    local v = flat[1][10]
    if type(v) ~= "number" then v = v:item() end
    local h1, h2 = nn.F.fork(self.fc1(flat))
    local y = self.fc2(h1)
    if v > 0 or not ]] .. tostring(skip_head) .. [[ then
      local e = self.extra(h2)
      if v > 0 then y = nn.F.add(y, e) end
    end
    return y
  end}
return M()
]]
end
local data = vt.data.synthetic{size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 3}
local function gated_spec(skip_head, steps, overrides)
  return vt.spec{model = vt.nn.model{source = gated_source(skip_head)}, data = data, steps = steps, batch = 16,
                 seed = 1, checkpoint_every = 2, optim = vt.optim.sgd{lr = 0.05},
                 round = {bits = 32, band = 1 / 16, boundaries = overrides}}
end

-- Plays the game on the trainer's finished run (auditor splitk4, judge blocked).
local function play(name, trainer, spec)
  local net = game.network{game = name}
  net:add(game.trainer{runner = trainer})
  net:add(game.auditor{store = vt.store.open(tmp .. "/game-" .. name .. "-a"), data = data, profile = "splitk4"})
  net:add(game.judge{store = vt.store.open(tmp .. "/game-" .. name .. "-j"), data = data, profile = "blocked"})
  return game.play{network = net, client = game.client{store = vt.store.open(tmp .. "/game-" .. name .. "-c"), spec = spec}}
end

suite:test("a step commits only the records it wrote: an output off the loss's path leaves none", function()
  -- The trainer reuses its records' buffers from step to step; the input gradient of `extra`
  -- has its call reserved in the forward, and its backward runs only where the head joins the
  -- loss. Before 2026-12-05 the record of the last step that ran it was committed again in the
  -- steps that did not, the auditor counted it as unused, and the game convicted the honest
  -- trainer.
  local spec = gated_spec(false, 6)
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(tmp .. "/stale-t"), run = "run"}
  local used = {}
  for step, report in trainer:steps() do used[step] = report.boundaries["extra:bwd"] ~= nil end
  local run = trainer:store():run("run")
  local unused_steps = 0
  for step = 1, 6 do
    local has = false
    for _, r in ipairs(run:step(step)) do has = has or r.boundary == "extra.dx:bwd" end
    T.assert_eq(has, used[step], "step " .. step .. ": a record for extra.dx:bwd exactly where its backward ran")
    if not used[step] then unused_steps = unused_steps + 1 end
  end
  -- The data has both kinds of step, with a used one before an unused one (else no record
  -- could be left over).
  T.assert_true(unused_steps > 0 and unused_steps < 6 and used[1], "the head is used at some steps only")
  local auditor = vt.auditor{spec = spec, data = data, logs = trainer, store = vt.store.open(tmp .. "/stale-a"),
                             profile = "splitk4"}
  local result = auditor:run{progress = false}
  T.assert_eq(result.log_mismatches, 0)
  T.assert_eq(result.root, trainer:root())
  local verdict = play("stale", trainer, spec)
  T.assert_eq(verdict.outcome, "accepted", verdict.reason)
end)

suite:test("window overrides are checked against the run's first step, never a later one", function()
  -- extra:fwd is reached at steps 1, 2, 4 and 6-8, not at 3 or 5 (checked below). The
  -- override is checked at step 1 by every party that takes it; a judge replaying leaf 2
  -- starts at step 3, and a trainer resumed after leaf 1 too: before 2026-12-05 they checked
  -- their own first step and refused the spec, so the poisoned interval went `inconclusive`.
  local probe = vt.trainer{spec = gated_spec(true, 8), data = data, mode = "rounded"}
  local reaches = {}
  for step, report in probe:steps() do reaches[step] = report.boundaries["extra:fwd"] ~= nil end
  T.assert_true(reaches[1] and not reaches[3], "step 1 reaches the branch and step 3 does not")
  local spec = gated_spec(true, 8, {["extra:fwd"] = {band = 0.25}})
  local resumed_store = vt.store.open(tmp .. "/override-resumed")
  local first = vt.trainer{spec = spec, data = data, store = resumed_store, run = "run"}
  first:step()
  first:step()
  local again = vt.trainer{spec = spec, data = data, store = resumed_store, run = "run"}
  T.assert_eq(again:step().step, 3)
  -- Labels poisoned in interval 2 (steps 3-4): the judge's replay starts at step 3.
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(tmp .. "/override-t"), run = "run",
                             deviate = {kind = "labels", from_step = 3, to_step = 3}}
  trainer:run{progress = false}
  local verdict = play("override", trainer, spec)
  T.assert_eq(verdict.outcome, "trainer_at_fault", verdict.reason)
  -- The check itself: a name no boundary of step 1 has is refused there (train_test holds the
  -- message), even when a later step would reach it.
  T.assert_error(function()
    vt.trainer{spec = gated_spec(true, 8, {["extra:nothere"] = {band = 0.25}}), data = data, mode = "rounded"}:step()
  end, "did not reach in the run's first step: 'extra:nothere'", true)
end)

-- The honest two-step run of an MLP, and an auditor of it with step 2's records changed.
local mlp_spec = vt.spec{model = vt.models.mlp{input_shape = {1, 8, 8}, hidden = {16}, classes = 4}, data = data,
                         optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 16, steps = 2, seed = 1,
                         checkpoint_every = 1, round = {bits = 32, band = 1 / 16}}
local honest = vt.trainer{spec = mlp_spec, data = data, store = vt.store.open(tmp .. "/trace-t"), run = "run"}
honest:run{progress = false}

local function audit_step2(name, change)
  local hr = honest:store():run("run")
  local forged = vt.store.open(tmp .. "/trace-" .. name)
  local run = forged:create_run("run", {spec = hr:spec(), checkpoint_every = 1, steps = 2})
  run:put_checkpoint(0, hr:checkpoint(0))
  run:write_step(1, hr:step(1))
  run:put_checkpoint(1, hr:checkpoint(1))
  local records = {}
  for _, r in ipairs(hr:step(2)) do records[#records + 1] = r end
  run:write_step(2, change(records))
  run:put_checkpoint(2, hr:checkpoint(2))
  local auditor = vt.auditor{spec = mlp_spec, data = data, logs = forged, profile = "splitk4"}
  auditor:step()
  return auditor:step()
end

-- The trace's entries, decoded (u16be name length, name, u32be call, u32be crc), and encoded.
local function u32(s, at) return ((s:byte(at) * 256 + s:byte(at + 1)) * 256 + s:byte(at + 2)) * 256 + s:byte(at + 3) end
local function be32(v) return string.char(math.floor(v / 2 ^ 24) % 256, math.floor(v / 2 ^ 16) % 256, math.floor(v / 256) % 256, v % 256) end
local function decode_trace(s)
  local out, at = {}, 1
  while at <= #s do
    local len = s:byte(at) * 256 + s:byte(at + 1)
    out[#out + 1] = {name = s:sub(at + 2, at + 1 + len), call = u32(s, at + 2 + len), crc = u32(s, at + 6 + len)}
    at = at + 10 + len
  end
  return out
end
local function encode_trace(entries)
  local parts = {}
  for _, e in ipairs(entries) do
    parts[#parts + 1] = string.char(math.floor(#e.name / 256), #e.name % 256) .. e.name .. be32(e.call) .. be32(e.crc)
  end
  return table.concat(parts)
end
local function with_trace(change)
  return function(records)
    local out = {}
    for _, r in ipairs(records) do
      if r.boundary == "~trace" then
        local value = change(decode_trace(r.value))
        if value then out[#out + 1] = {boundary = r.boundary, call = r.call, value = value} end
      else
        out[#out + 1] = r
      end
    end
    return out
  end
end

suite:test("a step's trace names exactly the boundary calls the step made", function()
  local control = audit_step2("control", function(records) return records end)
  T.assert_eq(control.log_mismatches, 0)
  local cases = {
    {"no trace", function() return nil end, "has no trace record ('~trace' call 0)"},
    {"an entry for a call not made", function(e)
      e[#e + 1] = {name = "zz:fwd", call = 0, crc = 7}
      return encode_trace(e)
    end, "the trace names boundary 'zz:fwd' call 0 at step 2, a call this replay never made"},
    {"an entry left out", function(e)
      local dropped = table.remove(e, 1)
      return encode_trace(e), dropped
    end, "the trace has no entry for boundary"},
    {"entries out of order", function(e)
      e[1], e[2] = e[2], e[1]
      return encode_trace(e)
    end, "trace record not canonical"},
    {"an entry twice", function(e)
      table.insert(e, 2, e[1])
      return encode_trace(e)
    end, "trace record not canonical"},
  }
  for _, case in ipairs(cases) do
    local report = audit_step2((case[1]:gsub(" ", "-")), with_trace(case[2]))
    T.assert_true(report.log_mismatches >= 1, case[1] .. ": counted")
    T.assert_true(report.log_mismatch:find(case[3], 1, true) ~= nil, case[1] .. ": " .. report.log_mismatch)
  end
end)

T.run{cleanup = function() vt.fs.remove(tmp) end}
