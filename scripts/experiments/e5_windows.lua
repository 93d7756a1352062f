-- E5 (paper Table 4): the calibrated window per layer type. vt.calibrate measures the
-- divergence of every boundary across profiles; this groups the boundaries by layer type and
-- prints the largest divergence against each value's magnitude (max |x - x'| / m, docs/ROUNDING.md
-- "Magnitudes") and the resulting alpha. Calibration replays under band 0.25 plus `cal_alpha`
-- against magnitudes (as E3 does), so that every profile measures the same upstream values.
--
--   vtrun scripts/experiments/e5_windows.lua [models=resnet,gpt] [steps=5] [profiles=all|a,b,...] [cal_alpha=2^-40] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({models = "resnet,gpt", steps = 5, profiles = "all", cal_alpha = 2 ^ -40, out = ""}, arg)
local out = lib.outdir("e5_windows", a.out)

-- Layer type of a boundary name (PyTorch-style module names). Boundaries inside an op get
-- their own rows: an op's input gradient (".dx", ".da", ".db"), a norm's or softmax's
-- statistics (".mean", ".var", ".sum" forward; ".stats", ".sum" backward).
local function layer_type(name)
  local base, kind = name:match("^(.*):(%w+)$")
  if kind ~= "fwd" and kind ~= "bwd" then return "parameters and optimizer (" .. (kind == "grad" and "grad" or "update") .. ")" end
  local part = ""
  if base:match("%.d[xab]$") then
    part, kind = " input gradient", "bwd"
  elseif base:match("%.mean$") or base:match("%.var$") or base:match("%.stats$") or base:match("%.sum$") then
    part = " statistics"
  end
  local function label(t) return t .. part .. " (" .. kind .. ")" end
  if base:find("attn%.softmax") then return label("attention softmax") end
  if base:find("attn%.scores") or base:find("attn%.mix") then return label("attention products") end
  if base:find("conv") or base:find("downsample%.0") then return label("convolution") end
  if base:find("bn") or base:find("downsample%.1") then return label("batch norm") end
  if base:find("ln") then return label("layer norm") end
  if base:find("gelu") then return label("GELU") end
  if base:find("wte") or base:find("wpe") then return label("embedding") end
  if base:find("pool") then return label("pooling") end
  if base:find("loss") or base:find("softmax") then return label("loss") end
  return label("linear")
end

local function kind_of(name) return name:match(":([%w_]+)$") end

-- Groups a calibration's boundaries by `key(name)`: count, largest divergence and alpha,
-- straddles, share of values that differ.
local function group(cal, key)
  local groups = {}
  for name, b in pairs(cal.boundaries) do
    local g = key(name)
    local e = groups[g] or {n = 0, max_rel = 0, alpha = 0, straddles = 0, differ = 0, elements = 0}
    groups[g] = e
    e.n = e.n + 1
    e.max_rel = math.max(e.max_rel, b.max_rel)
    e.alpha = math.max(e.alpha, b.alpha)
    e.straddles, e.differ, e.elements = e.straddles + b.straddles, e.differ + b.differ, e.elements + b.elements
  end
  local names = {}
  for g in pairs(groups) do names[#names + 1] = g end
  table.sort(names, function(x, y)
    if groups[x].max_rel ~= groups[y].max_rel then return groups[x].max_rel > groups[y].max_rel end
    return x < y
  end)
  return groups, names
end

local profiles = {}
if a.profiles == "all" then
  for _, p in ipairs(vt.profiles()) do
    if p.available ~= false then profiles[#profiles + 1] = p.name end
  end
else
  for p in a.profiles:gmatch("[^,]+") do profiles[#profiles + 1] = p end
end
local header = {"model", "layer type", "boundaries", "max d/m", "alpha", "straddles", "values differing %"}
local kind_header = {"model", "boundary kind", "boundaries", "max d/m", "alpha", "straddles", "values differing %"}
local rows, kind_rows = {}, {}
for model in a.models:gmatch("[^,]+") do
  local s = lib.setup(model)
  local cal = vt.calibrate{spec = lib.spec(s, a.steps, {bits = 32}), data = s.recipe, profiles = profiles, steps = a.steps,
                           replay_window = {band = 0.25, alpha = a.cal_alpha}}
  for _, t in ipairs{{layer_type, rows}, {kind_of, kind_rows}} do
    local groups, names = group(cal, t[1])
    for _, g in ipairs(names) do
      local e = groups[g]
      t[2][#t[2] + 1] = {model, g, e.n, e.max_rel, e.alpha, e.straddles, 100 * e.differ / math.max(e.elements, 1)}
    end
  end
  lib.json(out .. "/calibration-" .. model .. ".json", vt.json.decode(cal:json()))
end
print("machine: " .. lib.machine())
print(string.format("E5: calibrated windows by layer type, %d steps over profiles %s (alpha = max(2^-48, 8 * max d/m))",
                    a.steps, table.concat(profiles, ",")))
lib.table(header, rows)
print("E5: the same by boundary kind")
lib.table(kind_header, kind_rows)
lib.csv(out .. "/e5_windows.csv", header, rows)
lib.csv(out .. "/e5_windows_by_kind.csv", kind_header, kind_rows)
print(vt.json.encode{experiment = "E5", rows = #rows})
