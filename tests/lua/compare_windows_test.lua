-- scripts/verify/compare_windows.lua: what a calibration with one more profile widens.
local T = require "vt.test"

local s = T.suite("compare_windows")
local script = "../../scripts/verify/compare_windows.lua"

local function write(path, round)
  local f = assert(io.open(path, "w"))
  f:write(vt.json.encode(round))
  f:close()
end

local function run(...)
  -- Through sh for its stderr too (a child's stdout is the line channel; stderr is ours).
  local p = vt.process.spawn{"sh", "-c", 'exec "$0" "$@" 2>&1', vt.executable(), script, ...}
  local lines = {}
  while true do
    local line = p:receive(60)
    if line == nil then break end
    lines[#lines + 1] = line
  end
  return table.concat(lines, "\n"), p:wait(60)
end

local tmp = vt.fs.tmpdir("compare-windows")

s:test("counts wider, narrower and equal boundaries and lists the widest ratios first", function()
  local kind = {band = 0.25, alpha = 1e-15}
  write(tmp .. "/a.json", {bits = 32, fwd = {band = 0.25, alpha = 4e-15}, bwd = kind, grad = kind, update = kind,
                           boundaries = {x = {band = 0.25, alpha = 4e-15}, y = {band = 0.25, alpha = 2e-15},
                                         z = {band = 0.25, alpha = 1e-15}, w = {band = 0.25, alpha = 1e-16},
                                         only = {band = 0.25, alpha = 1e-15}}})
  write(tmp .. "/b.json", {bits = 32, fwd = kind, bwd = kind, grad = kind, update = kind,
                           boundaries = {x = {band = 0.25, alpha = 1e-15}, y = {band = 0.25, alpha = 1e-15},
                                         z = {band = 0.25, alpha = 1e-15}, w = {band = 0.25, alpha = 1e-15}}})
  local out, status = run(tmp .. "/a.json", tmp .. "/b.json", "gpu", "cpu")
  T.assert_eq(status, 0)
  T.assert_true(out:find("fwd    widest alpha  gpu 4e-15  cpu 1e-15", 1, true), out)
  T.assert_true(out:find("boundaries: 2 wider in gpu, 1 narrower, 1 equal, 1 only in gpu", 1, true), out)
  local x, y = out:find("  x ", 1, true), out:find("  y ", 1, true)
  T.assert_true(x and y and x < y, "x (x4) before y (x2): " .. out)
  T.assert_true(out:find("(x4)", 1, true), out)
end)

s:test("a file without a window table is named", function()
  write(tmp .. "/bad.json", {bits = 32})
  local out, status = run(tmp .. "/bad.json", tmp .. "/bad.json")
  T.assert_true(status ~= 0)
  T.assert_true(out:find("bad.json' holds no window table", 1, true), out)
  out, status = run(tmp .. "/missing.json", tmp .. "/bad.json")
  T.assert_true(status ~= 0)
  T.assert_true(out:find("cannot open '" .. tmp .. "/missing.json'", 1, true), out)
end)

T.run{cleanup = function() vt.fs.remove(tmp) end}
