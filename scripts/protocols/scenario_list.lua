-- The scenarios of PROTOCOL.md and the adaptive attacks, as data: the setups they train
-- (model, data, run length), who cheats in each and how, what the game must decide, and the
-- logging windows they run under. protocols/scenarios.lua runs them.
local M = {}

M.setups = {
  mnist = {
    data = {kind = "fashion_mnist", limit = 4096},
    model = {input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10},
    optim = {lr = 0.05, momentum = 0.9}, batch = 64, steps = 60, k = 5,
  },
  tiny = {
    data = {kind = "synthetic", size = 512, input_shape = {1, 8, 8}, classes = 4, seed = 3},
    model = {input_shape = {1, 8, 8}, hidden = {32}, classes = 4},
    optim = {lr = 0.05, momentum = 0.9}, batch = 16, steps = 20, k = 4,
  },
}

-- Each scenario: how the trainer deviates from the spec (vt.trainer's `deviate`; "s" in
-- from_step/to_step is the cheating step, "interval_end" the last step of the checkpoint
-- interval holding it), protocol behaviours of the trainer and auditor
-- parties, deadlines, and what the game must decide: `expect` is an outcome, or a table of
-- outcomes by window with a `default`. Checks beyond the outcome:
--   localised     the disputed interval must contain the cheating step (when not accepted)
--   at = "random" the cheating step is drawn (seeded) from the whole run, not s
--   evidence      "illegitimate": the judge's evidence must hold illegitimate entries
--   reason        a string the verdict's reason must contain
--   decided_by_judge  windows under which the evidence must be empty (no illegitimate entry,
--                 no mismatched record) and the judge's replay must give the auditor's leaf,
--                 not the trainer's: the judge's digest decides
--   steering      the trainer's tampered values must reach every boundary kind the window
--                 logs (true) or those listed, and never exceed the auditor's `steerable`
--                 count, step by step
--   window        a fixed window (the scenario runs only under it)
M.list = {
  {name = "honest", what = "honest trainer, honest auditor on another profile",
   expect = "accepted"},
  {name = "poison_labels", what = "data poisoning from step s: every label y becomes y+1",
   deviate = {kind = "labels"}, expect = "trainer_at_fault", localised = true},
  {name = "poison_trigger", what = "data poisoning from step s: a trigger patch on every other image, labelled 0",
   deviate = {kind = "trigger", target = 0}, expect = "trainer_at_fault", localised = true},
  {name = "lazy", what = "lazy trainer: skips the updates from step s",
   deviate = {kind = "lazy"}, expect = "trainer_at_fault", localised = true},
  {name = "wrong_lr", what = "wrong hyperparameter from step s: learning rate x10",
   deviate = {kind = "lr", amount = 10}, expect = "trainer_at_fault", localised = true},
  {name = "wrong_weight_decay", what = "wrong hyperparameter from step s: weight decay 0.1",
   deviate = {kind = "weight_decay", amount = 0.1}, expect = "trainer_at_fault", localised = true},
  {name = "steer", what = "trainer flips 4 values per update call far from any midpoint from step s, logged as directions",
   deviate = {kind = "steer", amount = 4}, expect = "trainer_at_fault", localised = true},
  {name = "steer_paper_window", what = "the same steering under the paper's window (band 0.25): each flip moves a value more than w from its midpoint, which no honest trainer does (accepted until 2026-12-04, when the checks allowed 2w)",
   window = "paper", deviate = {kind = "steer", amount = 4}, expect = "trainer_at_fault", limit = true},
  {name = "rewrite_logs", what = "trainer rewrites the logs of step s after committing",
   trainer = {rewrite_logs = "s"}, expect = "trainer_at_fault", localised = true},
  {name = "lying_auditor", what = "auditor lies about the leaves from the one holding step s",
   auditor = {lie_from_leaf = "s"}, expect = "auditor_at_fault", localised = true},
  {name = "trainer_refuses", what = "trainer refuses to disclose its logs",
   trainer = {refuse = {logs = true}}, expect = "trainer_at_fault"},
  {name = "trainer_late", what = "trainer answers the commitment request after the deadline",
   trainer = {delay = {commit = 1.5}}, deadlines = {commit = 1.0}, expect = "trainer_at_fault"},
  {name = "auditor_refuses", what = "auditor refuses the judge's leaf query in a dispute",
   deviate = {kind = "labels"}, auditor = {refuse = {leaf = true}}, expect = "auditor_at_fault"},
  {name = "wrong_weights", what = "weights returned to the client do not match the last leaf",
   trainer = {substitute_weights = true}, expect = "trainer_at_fault"},
  -- The adaptive attacks (issue 13): cheats aimed at the logging rules and the protocol.
  {name = "forge_exact", what = "from step s, one value per boundary call (every kind) far from any midpoint rounded the other way, logged EXACT",
   deviate = {kind = "forge_exact", amount = 1}, expect = "trainer_at_fault", localised = true, evidence = "illegitimate"},
  {name = "flip_within", what = "from step s, every value that a legitimate entry can round the other way is (logged ones within w/2 of their midpoints; wide-window values by EXACT), at every boundary",
   deviate = {kind = "flip_within"}, expect = "accepted", steering = true, limit = true},
  {name = "steer_toward", what = "from step s, a greedy backdoor: every value of the gradient and update boundaries that a legitimate entry can round the way that lowers a trigger loss (class 0) is",
   deviate = {kind = "steer_toward", target = 0}, expect = "accepted", steering = {"grad", "update"}, limit = true},
  {name = "withhold_record", what = "trainer discloses step s without one of its log records",
   trainer = {withhold_record = "s"}, expect = "trainer_at_fault", localised = true, reason = "log digest"},
  {name = "replay_record", what = "trainer discloses step s with one record replaced by step s-1's (same boundary and call)",
   trainer = {replay_record = "s"}, expect = "trainer_at_fault", localised = true, reason = "log digest"},
  {name = "replace_example", what = "one training example of the batch replaced at one random step r",
   deviate = {kind = "replace_example", from_step = "s", to_step = "s"}, at = "random", expect = "trainer_at_fault",
   localised = true},
  {name = "inconsistent_bisection", what = "poisoning trainer answers bisection queries with the honest run's leaves and proofs",
   deviate = {kind = "labels"}, trainer = {leaves_from = "honest"}, expect = "trainer_at_fault",
   reason = "answer in bisection did not verify"},
  {name = "judge_decides", what = "at the last step of the interval holding s only, one value per update call far from any midpoint rounded the other way under a NONE entry: only the judge's replay decides",
   deviate = {kind = "silent_flip", amount = 1, from_step = "interval_end", to_step = "interval_end"},
   expect = "trainer_at_fault",
   localised = true, decided_by_judge = {paper = true, tight = true, calibrated = true}},
}

-- The outcome `scenario` must have under `window`.
function M.expected(scenario, window)
  local e = scenario.expect
  if type(e) == "table" then return e[window] or e.default end
  return e
end

function M.find(name)
  for _, s in ipairs(M.list) do
    if s.name == name then return s end
  end
  local names = {}
  for _, s in ipairs(M.list) do names[#names + 1] = s.name end
  error("unknown scenario '" .. tostring(name) .. "' (valid: " .. table.concat(names, ", ") .. ")", 2)
end

-- The windows a context can run under; "calibrated" is measured per context (spec_for).
M.windows = {
  tight = {bits = 32, band = 1 / 16},
  paper = {bits = 32, band = 0.25},
  calibrated = "measured",
}
M.window_names = {"paper", "tight", "calibrated"}

return M
