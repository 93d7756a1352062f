-- Ctrl-C during runner:run() stops after the step in progress and returns what was done
-- (every finished step is stored, and a new trainer on the store resumes after it), instead
-- of being ignored until the run ends and then throwing the result away.
local T = require "vt.test"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")

local child_script = [[
local dir = ...
local data = vt.data.synthetic{size = 4096, input_shape = {64}, classes = 4, seed = 1}
local spec = vt.spec{model = vt.models.mlp{input_shape = {64}, hidden = {256, 256}, classes = 4}, data = data,
                     optim = vt.optim.sgd{lr = 0.01}, batch = 64, steps = 100000, seed = 1, checkpoint_every = 10}
local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir)}
trainer:step()
print("running")
io.stdout:flush()
local r = trainer:run{progress = false}
print(vt.json.encode{interrupted = r.interrupted, steps_run = r.steps_run, step = r.step,
                     stored = trainer:store():run("run"):info().steps_written})
io.stdout:flush()
-- A later Ctrl-C interrupts Lua code as before (interpreted: LuaJIT's hooks do not fire
-- inside a compiled loop).
jit.off()
print("looping")
io.stdout:flush()
while true do end
]]

local s = T.suite("interrupt")

s:test("Ctrl-C stops runner:run() after a step, keeps what is stored, and a new trainer resumes", function()
  local script = tmp .. "/child.lua"
  local f = assert(io.open(script, "w"))
  f:write(child_script)
  f:close()
  local p = vt.process.spawn{vt.executable(), script, tmp .. "/store"}
  T.assert_eq(p:receive(120), "running")
  os.execute("sleep 0.5")
  -- Two Ctrl-C in a row: the run stops after its step, and the process is not killed.
  os.execute("kill -INT " .. p:pid() .. "; kill -INT " .. p:pid())
  local line = p:receive(120)
  T.assert_true(line ~= nil, "the run returned after Ctrl-C")
  local r = vt.json.decode(line)
  T.assert_true(r.interrupted, "report.interrupted")
  T.assert_true(r.steps_run >= 1 and r.steps_run < 99999, "steps_run " .. tostring(r.steps_run))
  T.assert_eq(r.stored, r.step)
  T.assert_eq(p:receive(60), "looping")
  os.execute("kill -INT " .. p:pid())
  local status = p:wait(60)
  T.assert_true(status ~= nil and status ~= 0, "a Ctrl-C in Lua code still ends the script with an error")
  -- The store holds every finished step: a new trainer resumes from its last leaf.
  local data = vt.data.synthetic{size = 4096, input_shape = {64}, classes = 4, seed = 1}
  local spec = vt.spec{model = vt.models.mlp{input_shape = {64}, hidden = {256, 256}, classes = 4}, data = data,
                       optim = vt.optim.sgd{lr = 0.01}, batch = 64, steps = 100000, seed = 1, checkpoint_every = 10}
  local again = vt.trainer{spec = spec, data = data, store = vt.store.open(tmp .. "/store")}
  local report = again:step()
  T.assert_eq(report.step, r.step - r.step % 10 + 1)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
