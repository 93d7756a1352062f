-- E4 (paper Table 3): how many logged decisions the auditor actually needs. Trainer on one
-- profile, auditor on another; per step, the corrections (entries whose replayed value differs
-- from plain rounding of the auditor's own value) by boundary kind, for each b.
--
--   vtrun scripts/experiments/e4_corrections.lua [model=gpt] [steps=5] [bits=32,30,28,27,26] [a=native] [b=splitk4] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "gpt", steps = 5, bits = "32,30,28,27,26", a = "native", b = "splitk4", out = ""}, arg)
local out = lib.outdir("e4_corrections", a.out)
local s = lib.setup(a.model)
local tmp = lib.tmpdir()

local header = {"b", "logged/step", "corrections/step", "fwd", "bwd", "grad", "update", "corrections % of logged", "roots equal"}
local rows = {}
for b in a.bits:gmatch("%d+") do
  local spec = lib.spec(s, a.steps, {bits = tonumber(b), band = 0.25})
  local t = vt.trainer{spec = spec, data = s.data, store = vt.store.open(tmp .. "/t" .. b), profile = a.a}
  local u = vt.auditor{spec = spec, data = s.data, logs = t, store = vt.store.open(tmp .. "/u" .. b), profile = a.b}
  local kinds = {fwd = 0, bwd = 0, grad = 0, update = 0}
  local logged, corrections = 0, 0
  for _ = 1, a.steps do
    t:step()
    local r = u:step()
    logged, corrections = logged + r.logged, corrections + r.corrections
    for name, bs in pairs(r.boundaries) do
      local kind = name:match(":(%w+)$")
      kind = kinds[kind] and kind or "update"
      kinds[kind] = kinds[kind] + bs.corrections
    end
  end
  rows[#rows + 1] = {tonumber(b), logged / a.steps, corrections / a.steps, kinds.fwd / a.steps, kinds.bwd / a.steps,
                     kinds.grad / a.steps, kinds.update / a.steps, 100 * corrections / math.max(logged, 1),
                     tostring(t:root() == u:root())}
end
print("machine: " .. lib.machine())
print(string.format("E4: %s, %d steps, trainer %s, auditor %s, paper window (band 0.25)", a.model, a.steps, a.a, a.b))
lib.table(header, rows)
lib.csv(out .. "/e4_corrections.csv", header, rows)
vt.fs.remove(tmp)
print(vt.json.encode{experiment = "E4", model = a.model, steps = a.steps, corrections_per_step_b32 = rows[1][3],
                     logged_per_step_b32 = rows[1][2]})
