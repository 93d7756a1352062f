-- Every ordered pair of device profiles: a trainer on each profile, an auditor on each
-- other profile replaying its logs, and the roots compared. Process-level profiles run in
-- their own processes (`vtrun --profile NAME`), so this script drives subprocesses.
--
--   vtrun scripts/verify/pairs.lua [model=mlp|resnet|gpt] [steps=200] [dir=] [profiles=a,b,...]
--                                  [window=paper|calibrated] [jobs=1] [pairs=T:A,T:A,...]
--
-- pairs= runs only the ordered pairs named (trainer profile:auditor profile), with trainers on
-- the profiles that train in them; profiles= then defaults to every profile they name (the
-- calibration's set). E.g. the GPU check: pairs=cuda:native,cuda:splitk4,native:cuda.
--
-- window "calibrated" first runs vt.calibrate over the chosen profiles (10 steps, the first
-- profile as reference) and trains every run with those windows. `jobs` runs that many
-- workers at once (each single-threaded). A run that finished keeps its results in
-- WORKDIR/NAME.result: started again with the same workdir, model, steps, profiles and
-- window, the script reuses them and redoes only unfinished runs (a full matrix of nine
-- profiles at 200 steps takes hours). It refuses a workdir it did not make, or made with
-- other settings, and deletes nothing but its own runs' directories. Prints a line per trainer and per auditor as each
-- finishes, then the matrix of (trainer, auditor) outcomes, and exits 1 if any pair
-- disagrees. Its closing line is "N passed, N failed" over the ordered pairs.
local args = vt.args({model = "mlp", steps = 200, dir = "", profiles = "", window = "paper", jobs = 1, pairs = ""},
                     arg)
local model, steps, window, jobs = args.model, args.steps, args.window, args.jobs
local workdir = args.dir ~= "" and args.dir or vt.fs.tmpdir("pairs")
local only = args.profiles ~= "" and args.profiles or nil
-- The ordered pairs asked for ("T:A" -> true); nil: every pair.
local wanted = nil
if args.pairs ~= "" then
  wanted = {}
  local named = {}
  for item in args.pairs:gmatch("[^,]+") do
    local t, a = item:match("^([%w_]+):([%w_]+)$")
    if not t or t == a then
      error("pairs must be TRAINER:AUDITOR items of two different profiles, separated by commas, got '" .. item .. "'", 0)
    end
    wanted[t .. ":" .. a] = true
    named[#named + 1] = t
    named[#named + 1] = a
  end
  if only == nil then only = table.concat(named, ",") end
end
local vtrun = arg[-1]
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local worker = here .. "pairs_worker.lua"
if window ~= "paper" and window ~= "calibrated" then error("window must be paper or calibrated, got " .. window) end
if jobs < 1 or jobs ~= math.floor(jobs) then error("jobs must be an integer >= 1, got " .. tostring(jobs), 0) end

local profiles = {}
for _, p in ipairs(vt.profiles()) do
  if (only == nil or ("," .. only .. ","):find("," .. p.name .. ",", 1, true)) and p.available ~= false then
    profiles[#profiles + 1] = p.name
  end
end

if only ~= nil then
  local known = {}
  for _, p in ipairs(vt.profiles()) do known[p.name] = p end
  for name in only:gmatch("[^,]+") do
    if known[name] == nil then error("pairs.lua: unknown profile '" .. name .. "'", 0) end
    if known[name].available == false then error("pairs.lua: " .. known[name].unavailable, 0) end
  end
end
local function run_pair(p, q) return p ~= q and (wanted == nil or wanted[p .. ":" .. q] == true) end
local function trains(p)
  for _, q in ipairs(profiles) do
    if run_pair(p, q) then return true end
  end
  return false
end

-- Resume only what was started with the same settings.
local config = vt.json.encode{model = model, steps = steps, profiles = profiles, window = window,
                              pairs = args.pairs ~= "" and args.pairs or nil}
local function read(path)
  local f = io.open(path)
  if not f then return nil end
  local text = f:read("*a")
  f:close()
  return text
end
-- Never deletes a directory it did not make: a workdir must be new, empty, or one this
-- script made with the same settings (then finished runs are reused).
local previous = read(workdir .. "/config.json")
if previous == nil then
  if vt.fs.exists(workdir) and #vt.fs.list(workdir) > 0 then
    error("pairs.lua: workdir '" .. workdir .. "' is not empty and was not made by pairs.lua; give a new or empty one", 0)
  end
  vt.fs.mkdir(workdir)
  local f = assert(io.open(workdir .. "/config.json", "w"))
  f:write(config)
  f:close()
elseif previous ~= config then
  error("pairs.lua: workdir '" .. workdir .. "' holds runs made with other settings (" .. previous ..
        "); give another workdir or delete that one yourself", 0)
end

local function parse(out)
  local result = {}
  for k, v in out:gmatch("RESULT (%S+)=(%S+)") do result[k] = v end
  return result
end

-- Jobs: {name, profile, args, done(result)}; a finished job's output is kept in NAME.result.
local queue, running = {}, {}
local function submit(name, profile, args, done, discard)
  queue[#queue + 1] = {name = name, profile = profile, args = args, done = done, discard = discard}
end

local function start(job)
  local cached = read(workdir .. "/" .. job.name .. ".result")
  if cached then
    job.done(parse(cached), true)
    return false
  end
  vt.fs.remove(workdir .. "/" .. job.name)  -- an unfinished run of ours starts over
  local argv = {vtrun, "--profile", job.profile, worker}
  for _, a in ipairs(job.args) do argv[#argv + 1] = tostring(a) end
  job.child = vt.process.spawn(argv)
  job.output = {}
  running[#running + 1] = job
  return true
end

-- Runs queued jobs, at most `jobs` at once, until the queue and the running set are empty.
local function drain()
  while #queue > 0 or #running > 0 do
    while #running < jobs and #queue > 0 do start(table.remove(queue, 1)) end
    for i = #running, 1, -1 do
      local job = running[i]
      local line, why = job.child:receive(0.2)
      if line then
        job.output[#job.output + 1] = line
      elseif why == "closed" then
        table.remove(running, i)
        job.child:wait()
        local out = table.concat(job.output, "\n")
        local result = parse(out)
        if not result.root then error("worker failed (" .. job.name .. " on " .. job.profile .. "): " .. out) end
        local f = assert(io.open(workdir .. "/" .. job.name .. ".result", "w"))
        f:write(out, "\n")
        f:close()
        if job.discard then vt.fs.remove(workdir .. "/" .. job.name) end
        job.done(result, false)
      end
    end
  end
end

print(string.format("model %s, %d steps, profiles: %s, %s window, %d jobs, workdir %s", model, steps,
                    table.concat(profiles, ", "), window, jobs, workdir))
local windows = ""
if window == "calibrated" then
  windows = workdir .. "/windows.json"
  submit("calibrate", profiles[1], {"calibrate", windows, model, steps, table.concat(profiles, ",")}, function(c, cached)
    print(string.format("calibrated windows in %s s (reference %s%s): %s", c.seconds, profiles[1],
                        cached and ", cached" or "", windows))
  end)
  drain()
end
local trained = {}
for _, p in ipairs(profiles) do
  if trains(p) then submit(p, p, {"train", workdir .. "/" .. p, model, steps, windows}, function(r, cached)
    trained[p] = r
    print(string.format("trainer %-8s root %s  %s s  logged/step %s (fraction %s)  log bytes/step %s%s", p,
                        r.root:sub(1, 16), r.seconds, r.logged_per_step, r.logged_fraction, r.log_bytes_per_step,
                        cached and "  (cached)" or ""))
    io.stdout:flush()
  end) end
end
drain()

local outcome = {}
for _, p in ipairs(profiles) do
  for _, q in ipairs(profiles) do
    if run_pair(p, q) then
      local name = p .. "-by-" .. q
      submit(name, q, {"audit", workdir .. "/" .. p, workdir .. "/" .. name, model, steps, windows}, function(a, cached)
        local ok = a.root == trained[p].root and a.illegitimate == "0"
        outcome[name] = ok and ("ok/" .. a.corrections) or "DIFFER"
        print(string.format("auditor %-8s on %-8s %s  %s s  corrections %s  illegitimate %s%s", q, p,
                            ok and "equal root" or "DIFFER", a.seconds, a.corrections, a.illegitimate,
                            cached and "  (cached)" or ""))
        if not ok then
          print(string.format("pair %s -> %s: auditor root %s, first differing leaf %s, illegitimate %s", p, q, a.root,
                              a.first_leaf or "?", a.illegitimate))
        end
        io.stdout:flush()
      end, true)  -- an auditor's store is not needed once its root is compared: keep the disk small
    end
  end
end
drain()

local passed, failed = 0, 0
local header = string.format("%-15s", "trainer\\auditor")
for _, q in ipairs(profiles) do header = header .. string.format(" %10s", q) end
local rows = {header}
for _, p in ipairs(profiles) do
  local row = string.format("%-15s", p)
  for _, q in ipairs(profiles) do
    local o = run_pair(p, q) and outcome[p .. "-by-" .. q] or "-"
    if run_pair(p, q) then
      if o:sub(1, 2) == "ok" then passed = passed + 1 else failed = failed + 1 end
    end
    row = row .. string.format(" %10s", o)
  end
  rows[#rows + 1] = row
end
print("outcomes (ok/corrections copied from the trainer's log):")
for _, r in ipairs(rows) do print(r) end
print(string.format("%d passed, %d failed", passed, failed))
os.exit(failed == 0 and 0 or 1)
