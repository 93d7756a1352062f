-- E3 (paper Table 2): log bytes per step by encoding and by b, paper window against
-- calibrated windows, same model and steps, measured in one run.
--
--   vtrun scripts/experiments/e3_storage.lua [model=resnet] [steps=5] [bits=32,30,28,26] [profiles=native,splitk4,blocked] [cal_steps=10] [cal_passes=1] [cal_alpha=2^-40] [out=]
--   (paper sizes: model=resnet50 steps=2 bits=32 cal_steps=2; model=gpt2 steps=2 bits=32 cal_steps=2 cal_passes=2 cal_alpha=0 profiles=native,splitk4)
--
-- Calibration replays under band 0.25 plus `cal_alpha` against magnitudes, so that its own
-- replay is exact; cal_alpha=0 (band only) needs less memory (GPT-2 small's calibration
-- peaks at 20.9 GB with it, and exceeds 24 GB without), and vt.calibrate warns if that replay
-- then leaves the trainer's values.
--
-- Encodings per step: one byte per entry (the naive log), dense (5 states per byte, the
-- paper's), sparse (gaps + direction bits), auto (what the store keeps), and zstd over the
-- step's dense and sparse records. Calibrated windows come from vt.calibrate over `profiles`
-- (`cal_steps` steps). Last line: JSON with calibrated_over_paper_dense (calibrated sparse bytes /
-- paper-mode dense bytes at b = 32) and the logged fractions.
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({model = "resnet", steps = 5, bits = "32,30,28,26", profiles = "native,splitk4,blocked", cal_steps = 10, cal_passes = 1, cal_alpha = 2 ^ -40, out = ""}, arg)
local out = lib.outdir("e3_storage", a.out)
local s = lib.setup(a.model)
local tmp = lib.tmpdir()

-- Trains `steps` logged steps with `round` and measures every step's records.
local function measure(label, round, bits)
  local spec = lib.spec(s, a.steps, round)
  local store = vt.store.open(tmp .. "/" .. label)
  local t = vt.trainer{spec = spec, data = s.data, store = store}
  local totals = {elements = 0, logged = 0, exact = 0, byte_per_entry = 0, dense = 0, sparse = 0, auto = 0, zstd_dense = 0, zstd_sparse = 0, records = 0}
  local seconds = 0
  for step = 1, a.steps do
    local r = t:step()
    seconds = seconds + r.seconds
    totals.elements = totals.elements + r.elements
    totals.logged = totals.logged + r.logged
    totals.exact = totals.exact + r.exact
    local dense, sparse = {}, {}
    for _, rec in ipairs(lib.step_records(store:run("run"), step)) do
      local record = vt.log.decode(rec.value)
      local d, sp = record:encode("dense"), record:encode("sparse")
      dense[#dense + 1], sparse[#sparse + 1] = d, sp
      totals.byte_per_entry = totals.byte_per_entry + #record
      totals.dense = totals.dense + #d
      totals.sparse = totals.sparse + #sp
      totals.auto = totals.auto + #rec.value
      totals.records = totals.records + 1
    end
    totals.zstd_dense = totals.zstd_dense + #vt.zstd.compress(table.concat(dense))
    totals.zstd_sparse = totals.zstd_sparse + #vt.zstd.compress(table.concat(sparse))
  end
  local per = {label = label, bits = bits, seconds_per_step = seconds / a.steps}
  for k, v in pairs(totals) do per[k] = v / a.steps end
  per.logged_fraction = per.logged / per.elements
  store:close()
  t = nil
  collectgarbage("collect")
  return per
end

local rows = {}
print("machine: " .. lib.machine())
print(string.format("E3: %s, %d steps, batch %d (%s parameters)", a.model, a.steps, s.batch, lib.spec(s, 1):parameters()))
for b in a.bits:gmatch("%d+") do
  rows[#rows + 1] = measure("paper-b" .. b, {bits = tonumber(b), band = 0.25}, tonumber(b))
end
local profiles = {}
for p in a.profiles:gmatch("[^,]+") do profiles[#profiles + 1] = p end
-- Calibration's own replay must be exact (every profile measures the same upstream values):
-- the paper's band plus a small absolute term against magnitudes covers cancelled sums.
local cal = vt.calibrate{spec = lib.spec(s, math.max(a.steps, a.cal_steps), {bits = 32}), data = s.recipe,
                         profiles = profiles, steps = a.cal_steps, passes = a.cal_passes,
                         replay_window = {band = 0.25, alpha = a.cal_alpha}}
lib.json(out .. "/calibration.json", vt.json.decode(cal:json()))
rows[#rows + 1] = measure("calibrated-b32", cal.round, 32)

local header = {"window", "b", "values/step", "logged %", "EXACT/step", "1 B/entry", "dense", "sparse", "stored (auto)",
                "zstd(dense)", "zstd(sparse)", "bits/value (auto)"}
local table_rows = {}
for _, r in ipairs(rows) do
  table_rows[#table_rows + 1] = {r.label:match("^(%a+)"), r.bits, r.elements, 100 * r.logged_fraction, r.exact,
                                 r.byte_per_entry, r.dense, r.sparse, r.auto, r.zstd_dense, r.zstd_sparse, 8 * r.auto / r.elements}
end
print("bytes per step:")
lib.table(header, table_rows)
lib.csv(out .. "/e3_storage.csv", header, table_rows)

local paper32, calibrated = rows[1], rows[#rows]
for _, r in ipairs(rows) do
  if r.label == "paper-b32" then paper32 = r end
end
local result = {
  experiment = "E3", model = a.model, steps = a.steps,
  paper_dense_bytes_per_step = paper32.dense,
  paper_byte_per_entry_bytes_per_step = paper32.byte_per_entry,
  calibrated_sparse_bytes_per_step = calibrated.sparse,
  calibrated_over_paper_dense = calibrated.sparse / paper32.dense,
  paper_logged_fraction = paper32.logged_fraction,
  calibrated_logged_fraction = calibrated.logged_fraction,
  calibrated_logged_per_step = calibrated.logged,
  calibrated_exact_per_step = calibrated.exact,
}
lib.json(out .. "/e3_storage.json", {rows = rows, result = result})
vt.fs.remove(tmp)
print(vt.json.encode(result))
