-- E5 (paper Table 4): the calibrated window per layer type. vt.calibrate measures the
-- divergence of every boundary across profiles; this groups the boundaries by layer type and
-- prints the largest divergence (max |x - x'| / scale) and the resulting alpha.
--
--   vtrun scripts/experiments/e5_windows.lua [models=resnet,gpt] [steps=5] [profiles=native,splitk4,blocked] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({models = "resnet,gpt", steps = 5, profiles = "native,splitk4,blocked", out = ""}, arg)
local out = lib.outdir("e5_windows", a.out)

-- Layer type of a boundary name (PyTorch-style module names).
local function layer_type(name)
  local base, kind = name:match("^(.*):(%w+)$")
  if kind ~= "fwd" and kind ~= "bwd" then return "parameters and optimizer (" .. (kind == "grad" and "grad" or "update") .. ")" end
  if base:find("attn%.scores") or base:find("attn%.softmax") or base:find("attn%.mix") then return "attention (" .. kind .. ")" end
  if base:find("conv") or base:find("downsample%.0") then return "convolution (" .. kind .. ")" end
  if base:find("bn") or base:find("downsample%.1") then return "batch norm (" .. kind .. ")" end
  if base:find("ln") then return "layer norm (" .. kind .. ")" end
  if base:find("gelu") then return "GELU (" .. kind .. ")" end
  if base:find("wte") or base:find("wpe") then return "embedding (" .. kind .. ")" end
  if base:find("pool") then return "pooling (" .. kind .. ")" end
  if base:find("loss") or base:find("softmax") then return "loss (" .. kind .. ")" end
  return "linear (" .. kind .. ")"
end

local profiles = {}
for p in a.profiles:gmatch("[^,]+") do profiles[#profiles + 1] = p end
local header = {"model", "layer type", "boundaries", "max d/scale", "alpha", "straddles", "values differing %"}
local rows = {}
for model in a.models:gmatch("[^,]+") do
  local s = lib.setup(model)
  local cal = vt.calibrate{spec = lib.spec(s, a.steps, {bits = 32, band = 0.25}), data = s.recipe, profiles = profiles, steps = a.steps}
  local groups = {}
  for name, b in pairs(cal.boundaries) do
    local g = layer_type(name)
    local e = groups[g] or {n = 0, max_rel = 0, alpha = 0, straddles = 0, differ = 0, elements = 0}
    groups[g] = e
    e.n = e.n + 1
    e.max_rel = math.max(e.max_rel, b.max_rel)
    e.alpha = math.max(e.alpha, b.alpha)
    e.straddles, e.differ, e.elements = e.straddles + b.straddles, e.differ + b.differ, e.elements + b.elements
  end
  local names = {}
  for g in pairs(groups) do names[#names + 1] = g end
  table.sort(names, function(x, y) return groups[x].max_rel > groups[y].max_rel end)
  for _, g in ipairs(names) do
    local e = groups[g]
    rows[#rows + 1] = {model, g, e.n, e.max_rel, e.alpha, e.straddles, 100 * e.differ / math.max(e.elements, 1)}
  end
  lib.json(out .. "/calibration-" .. model .. ".json", vt.json.decode(cal:json()))
end
print(string.format("E5: calibrated windows by layer type, %d steps over profiles %s (alpha = max(2^-48, 8 * max d/scale))",
                    a.steps, a.profiles))
lib.table(header, rows)
lib.csv(out .. "/e5_windows.csv", header, rows)
print(vt.json.encode{experiment = "E5", rows = #rows})
