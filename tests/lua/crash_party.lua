-- The run of crash_game_test.lua: the tiny setup of the game's scenarios (an MLP on synthetic
-- 8x8 images, 20 steps, checkpoints every 4), honest or with its labels poisoned from step 13.
--
-- As a module (dofile): returns {recipe =, data =, spec =, deviate =, train = function(dir, poisoned)}.
-- As a script, the trainer process that the test kills:
--
--   vtrun crash_party.lua train DIR honest|poisoned
--
-- opens (or resumes) the run in DIR, prints "ready", trains to the end printing "step <s> <t>" after
-- each step (and its checkpoint) with the seconds since "ready", and prints "done <root>".
local scenarios = require "protocols.scenarios"

local M = {}
local setup = scenarios.setups.tiny
M.recipe = setup.data
M.data = vt.game.data(M.recipe)
M.spec = vt.spec{model = vt.models.mlp(setup.model), data = M.data, optim = vt.optim.sgd(setup.optim),
                 batch = setup.batch, steps = setup.steps, seed = 1, checkpoint_every = setup.k,
                 round = {bits = 32, band = 1 / 16}}
M.poison_from = 13
M.deviate = {kind = "labels", from_step = M.poison_from}

-- A trainer of the run in `dir` (resumed if the store holds part of it).
function M.trainer(dir, poisoned)
  return vt.trainer{spec = M.spec, data = M.data, store = vt.store.open(dir), run = "run", profile = "native",
                    deviate = poisoned and M.deviate or nil}
end

if arg and arg[1] == "train" then
  local runner = M.trainer(assert(arg[2], "usage: crash_party.lua train DIR honest|poisoned"), arg[3] == "poisoned")
  local t0 = vt.clock()
  io.write("ready\n")
  io.flush()
  for step in runner:steps() do
    io.write(string.format("step %d %.6f\n", step, vt.clock() - t0))
    io.flush()
  end
  io.write("done " .. runner:root() .. "\n")
  io.flush()
  os.exit(0)
end

return M
