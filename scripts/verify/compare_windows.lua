-- Compares two calibrated window tables (vt.calibrate's round, as JSON): per boundary kind
-- the widest alpha of each, and the boundaries where the first is wider than the second
-- (e.g. windows calibrated with a GPU profile against the same calibration without it).
--   vtrun compare_windows.lua A.json B.json [NAME_A] [NAME_B]
local function load(path)
  local f = io.open(path)
  if not f then error("compare_windows.lua: cannot open '" .. tostring(path) .. "'", 0) end
  local round = vt.json.decode(f:read("*a"))
  f:close()
  if type(round) ~= "table" or type(round.boundaries) ~= "table" then
    error("compare_windows.lua: '" .. path .. "' holds no window table (expected {boundaries = ...})", 0)
  end
  return round
end

local a, b = load(arg[1]), load(arg[2])
local name_a, name_b = arg[3] or arg[1], arg[4] or arg[2]
for _, kind in ipairs{"fwd", "bwd", "grad", "update"} do
  local wa, wb = a[kind] and a[kind].alpha, b[kind] and b[kind].alpha
  print(string.format("%-6s widest alpha  %s %.3g  %s %.3g", kind, name_a, wa or 0, name_b, wb or 0))
end
local wider, narrower, equal, only = {}, 0, 0, 0
for boundary, w in pairs(a.boundaries) do
  local v = b.boundaries[boundary]
  if v == nil then
    only = only + 1
  elseif w.alpha > v.alpha then
    wider[#wider + 1] = {boundary = boundary, ratio = v.alpha > 0 and w.alpha / v.alpha or math.huge, a = w.alpha,
                         b = v.alpha}
  elseif w.alpha < v.alpha then
    narrower = narrower + 1
  else
    equal = equal + 1
  end
end
table.sort(wider, function(x, y) return x.ratio > y.ratio end)
print(string.format("boundaries: %d wider in %s, %d narrower, %d equal, %d only in %s", #wider, name_a, narrower,
                    equal, only, name_a))
for i = 1, math.min(10, #wider) do
  local w = wider[i]
  print(string.format("  %-48s alpha %.3g against %.3g (x%.3g)", w.boundary, w.a, w.b, w.ratio))
end
