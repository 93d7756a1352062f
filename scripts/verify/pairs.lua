-- Every ordered pair of device profiles: a trainer on each profile, an auditor on each
-- other profile replaying its logs, and the roots compared. Process-level profiles run in
-- their own processes (`vtrun --profile NAME`), so this script drives subprocesses.
--
--   vtrun scripts/verify/pairs.lua [model=mlp|resnet|gpt] [steps=200] [workdir] [profiles=a,b,...] [window=paper|calibrated]
--
-- window "calibrated" first runs vt.calibrate over the chosen profiles (10 steps, the first
-- profile as reference) and trains every run with those windows.
-- Prints a line per trainer and per auditor as each finishes, then the matrix of (trainer,
-- auditor) outcomes, and exits 1 if any pair disagrees. Its closing line is "N passed,
-- N failed" over the ordered pairs.
local model = arg[1] or "mlp"
local steps = tonumber(arg[2]) or 200
local workdir = arg[3] or (os.tmpname() .. ".pairs")
local only = arg[4] ~= "" and arg[4] or nil
local window = arg[5] or "paper"
local vtrun = arg[-1]
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local worker = here .. "pairs_worker.lua"

local profiles = {}
for _, p in ipairs(vt.profiles()) do
  if only == nil or ("," .. only .. ","):find("," .. p.name .. ",", 1, true) then profiles[#profiles + 1] = p.name end
end
os.execute("rm -rf '" .. workdir .. "' && mkdir -p '" .. workdir .. "'")

local function run(profile, ...)
  local args = {}
  for i, a in ipairs({...}) do args[i] = string.format("%q", tostring(a)) end
  local cmd = string.format("%q --profile %s %q %s 2>&1", vtrun, profile, worker, table.concat(args, " "))
  local p = io.popen(cmd)
  local out = p:read("*a")
  local ok = p:close()
  local result = {}
  for k, v in out:gmatch("RESULT (%S+)=(%S+)") do result[k] = v end
  if not result.root then error("worker failed (" .. profile .. "): " .. out) end
  return result
end

print(string.format("model %s, %d steps, profiles: %s, %s window", model, steps, table.concat(profiles, ", "), window))
local windows = ""
if window == "calibrated" then
  windows = workdir .. "/windows.json"
  local c = run(profiles[1], "calibrate", windows, model, steps, table.concat(profiles, ","))
  print(string.format("calibrated windows in %s s (reference %s): %s", c.seconds, profiles[1], windows))
elseif window ~= "paper" then
  error("window must be paper or calibrated, got " .. window)
end
local trained = {}
for _, p in ipairs(profiles) do
  local r = run(p, "train", workdir .. "/" .. p, model, steps, windows)
  trained[p] = r
  print(string.format("trainer %-8s root %s  %s s  logged/step %s (fraction %s)  log bytes/step %s", p, r.root:sub(1, 16),
                      r.seconds, r.logged_per_step, r.logged_fraction, r.log_bytes_per_step))
  io.stdout:flush()
end

local passed, failed = 0, 0
local header = string.format("%-10s", "trainer\\auditor")
for _, q in ipairs(profiles) do header = header .. string.format(" %10s", q) end
local rows = {header}
for _, p in ipairs(profiles) do
  local row = string.format("%-15s", p)
  for _, q in ipairs(profiles) do
    if p == q then
      row = row .. string.format(" %10s", "-")
    else
      local a = run(q, "audit", workdir .. "/" .. p, workdir .. "/" .. p .. "-by-" .. q, model, steps, windows)
      local ok = a.root == trained[p].root and a.illegitimate == "0"
      if ok then passed = passed + 1 else failed = failed + 1 end
      row = row .. string.format(" %10s", ok and ("ok/" .. a.corrections) or "DIFFER")
      print(string.format("auditor %-8s on %-8s %s  %s s  corrections %s  illegitimate %s", q, p,
                          ok and "equal root" or "DIFFER", a.seconds, a.corrections, a.illegitimate))
      io.stdout:flush()
      if not ok then
        print(string.format("pair %s -> %s: auditor root %s, first differing leaf %s, illegitimate %s", p, q,
                            a.root, a.first_leaf or "?", a.illegitimate))
      end
    end
  end
  rows[#rows + 1] = row
end
print("outcomes (ok/corrections copied from the trainer's log):")
for _, r in ipairs(rows) do print(r) end
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
