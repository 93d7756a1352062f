-- E2 (paper Figure 4a/b): L2 distance between the weights of two device profiles over
-- training steps, three arms: plain FP32, FP64 rounded to FP32 without logs, and FP64 rounded
-- with logs (trainer on one profile, auditor replaying on the other).
--
--   vtrun scripts/experiments/e2_divergence.lua [model=gpt] [steps=100] [a=native] [b=splitk4] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "gpt", steps = 100, a = "native", b = "splitk4", out = ""}, arg)
local out = lib.outdir("e2_divergence", a.out)
local s = lib.setup(a.model)
local spec = lib.spec(s, a.steps, {bits = 32, band = 0.25})
local tmp = lib.tmpdir()

local function pair(mode)
  if mode == "log" then
    local t = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/t"), profile = a.a}
    local u = vt.auditor{spec = spec, data = s.data, logs = t, store = vt.store.open(tmp .. "/u"), profile = a.b}
    return t, u
  end
  return vt.trainer{spec = spec, data = s.data, mode = mode, profile = a.a},
         vt.trainer{spec = spec, data = s.data, mode = mode, profile = a.b}
end

local arms = {{"fp32", "plain FP32"}, {"rounded", "FP64 rounded, no logs"}, {"log", "FP64 rounded + logs"}}
local runners = {}
for i, arm in ipairs(arms) do runners[i] = {pair(arm[1])} end
local rows, first = {}, {}
local t0 = vt.clock()
for step = 1, a.steps do
  local row = {step}
  for i, arm in ipairs(arms) do
    local x, y = runners[i][1], runners[i][2]
    x:step()
    y:step()
    local d = lib.l2(x:state(), y:state())
    row[#row + 1] = d
    if d > 0 and first[arm[1]] == nil then first[arm[1]] = step end
  end
  rows[#rows + 1] = row
  if step % 10 == 0 then io.stderr:write(string.format("\rE2: step %d/%d (%.0f s)", step, a.steps, vt.clock() - t0)) end
end
io.stderr:write("\n")
local header = {"step", "l2 fp32", "l2 rounded no logs", "l2 rounded + logs"}
lib.csv(out .. "/e2_divergence.csv", header, rows)
print("machine: " .. lib.machine())
print(string.format("E2: %s, %d steps, profiles %s and %s: L2 distance of all weights", a.model, a.steps, a.a, a.b))
local shown = {}
for _, r in ipairs(rows) do
  if r[1] <= 5 or r[1] % math.max(1, math.floor(a.steps / 10)) == 0 then shown[#shown + 1] = r end
end
lib.table(header, shown)
for _, arm in ipairs(arms) do
  print(string.format("%-24s first differing step: %s", arm[2], first[arm[1]] or "never"))
end
-- Zero distances cannot be drawn on a log scale: the log arm is drawn at 1e-12 when exactly 0.
local plot_rows = {}
for i, r in ipairs(rows) do plot_rows[i] = {r[1], math.max(r[2], 1e-12), math.max(r[3], 1e-12), math.max(r[4], 1e-12)} end
lib.csv(out .. "/e2_plot.csv", header, plot_rows)
lib.plot(out .. "/e2_divergence.png", out .. "/e2_plot.csv", {
  title = string.format("E2: weight L2 distance, %s vs %s (%s); 1e-12 means exactly 0", a.a, a.b, a.model),
  xlabel = "step", ylabel = "L2 distance", logy = true,
  series = {{column = 2, title = "plain FP32"}, {column = 3, title = "FP64 rounded, no logs"}, {column = 4, title = "FP64 rounded + logs"}}})
vt.fs.remove(tmp)
print(vt.json.encode{experiment = "E2", model = a.model, steps = a.steps, first_differing_fp32 = first.fp32,
                     first_differing_rounded = first.rounded, first_differing_logged = first.log,
                     final_l2_fp32 = rows[#rows][2], final_l2_rounded = rows[#rows][3], final_l2_logged = rows[#rows][4]})
