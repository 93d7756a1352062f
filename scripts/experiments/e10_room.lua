-- E10a: the trainer's room to steer, measured. For the paper's window, the tight window
-- (band 1/16) and calibrated windows, an honest trainer trains on one profile and an auditor
-- replays on another; per boundary kind the auditor counts the values it replayed, the
-- logged entries, and the steerable values: those whose rounding the trainer could have
-- chosen either way and still passed every legitimacy check (docs/ROUNDING.md). That count,
-- not the logged one, is what a cheating trainer can choose from (docs/THREAT_MODEL.md).
--
--   vtrun scripts/experiments/e10_room.lua [model=mlp|resnet|gpt] [steps=10] [trainer=native] [auditor=splitk4] [cal_steps=3] [cal_alpha=2^-40] [out=]
--
-- Calibrated windows come from vt.calibrate over the trainer's and the auditor's profiles,
-- replaying under band 0.25 plus `cal_alpha` against per-element magnitudes (as E3 does), so
-- they follow each value's own error (docs/ROUNDING.md, "Magnitudes").
--
-- Last line: JSON {window = {elements, logged, steerable, illegitimate, roots_equal}}.
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "mlp", steps = 10, trainer = "native", auditor = "splitk4", cal_steps = 3, cal_alpha = 2 ^ -40, out = ""}, arg)
local out = lib.outdir("e10_room", a.out)
local s = lib.setup(a.model)
local tmp = lib.tmpdir()

local function kind_of(name)
  local suffix = name:match(":(%w+)$") or ""
  if suffix == "fwd" or suffix == "bwd" or suffix == "grad" then return suffix end
  return "update"
end

local windows = {
  {"paper", {bits = 32, band = 0.25}},
  {"tight", {bits = 32, band = 1 / 16}},
}
local cal = vt.calibrate{spec = lib.spec(s, a.cal_steps, {bits = 32}), data = s.recipe,
                         replay_window = {band = 0.25, alpha = a.cal_alpha},
                         profiles = {a.trainer, a.auditor}, steps = a.cal_steps}
windows[#windows + 1] = {"calibrated", cal.round}

local rows, summary, csv_rows = {}, {}, {}
for _, w in ipairs(windows) do
  local label, round = w[1], w[2]
  local spec = lib.spec(s, a.steps, round)
  local trainer = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/" .. label .. "-t"), profile = a.trainer}
  local t = trainer:run()
  local auditor = vt.auditor{spec = spec, data = s.data, logs = trainer, profile = a.auditor,
                             store = vt.store.open(tmp .. "/" .. label .. "-a")}
  local by_kind, total = {}, {elements = 0, logged = 0, steerable = 0, illegitimate = 0}
  for _ = 1, a.steps do
    local r = auditor:step()
    for name, b in pairs(r.boundaries) do
      local k = kind_of(name)
      local acc = by_kind[k] or {elements = 0, logged = 0, steerable = 0, illegitimate = 0}
      for _, f in ipairs({"elements", "logged", "steerable", "illegitimate"}) do
        acc[f] = acc[f] + b[f]
        total[f] = total[f] + b[f]
      end
      by_kind[k] = acc
    end
  end
  total.roots_equal = auditor:root() == t.root
  summary[label] = total
  for _, k in ipairs({"fwd", "bwd", "grad", "update"}) do
    local c = by_kind[k]
    if c then
      local row = {label, k, math.floor(c.elements / a.steps), math.floor(c.logged / a.steps), math.floor(c.steerable / a.steps),
                   string.format("%.4f%%", 100 * c.logged / c.elements),
                   string.format("%.4f%%", 100 * c.steerable / c.elements), c.illegitimate}
      rows[#rows + 1] = row
      csv_rows[#csv_rows + 1] = row
    end
  end
  rows[#rows + 1] = {label, "all", math.floor(total.elements / a.steps), math.floor(total.logged / a.steps), math.floor(total.steerable / a.steps),
                     string.format("%.4f%%", 100 * total.logged / total.elements),
                     string.format("%.4f%%", 100 * total.steerable / total.elements),
                     total.illegitimate .. (total.roots_equal and "" or " ROOTS DIFFER")}
end
local header = {"window", "kind", "values/step", "logged/step", "steerable/step", "logged", "steerable", "illegitimate"}
print("machine: " .. lib.machine())
print(string.format("%s, %d steps, trainer on '%s', auditor on '%s'", a.model, a.steps, a.trainer, a.auditor))
lib.table(header, rows)
lib.csv(out .. "/room.csv", header, csv_rows)
vt.fs.remove(tmp)
print(vt.json.encode(summary))
for _, v in pairs(summary) do
  if not v.roots_equal or v.illegitimate > 0 then os.exit(1) end
end
