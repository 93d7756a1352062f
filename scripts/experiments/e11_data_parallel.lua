-- E11: data-parallel training on c10d/Gloo (no published counterpart: the paper leaves
-- distributed training to future work). For each model and world size, a group of that many
-- processes on this host trains a sharded spec (vtrun --nproc N, ranks on native, splitk4,
-- blocked in turn) and audits it with the same group on shifted profiles; then one process
-- audits it alone on `blocked`. Prints step time, bytes every rank put on the wire, log
-- bytes per step, corrections and the roots' agreement; world 1 with shards=1 is the plain
-- one-process engine, for reference.
--
--   build/vtrun scripts/experiments/e11_data_parallel.lua [models=mlp,gpt] [worlds=1,2,4] [steps=100]
--               [shards=4] [out=]
local lib = dofile((debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./") .. "lib.lua")
local a = lib.args({models = {"mlp", "gpt"}, worlds = {1, 2, 4}, steps = 100, shards = 4, out = ""}, arg)
local out = lib.outdir("e11_data_parallel", a.out)
local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
local example = here .. "../examples/data_parallel.lua"
local vtrun = vt.executable()
local tmp = lib.tmpdir()
print(lib.machine())

-- Runs vtrun with `argv` (a list: no shell, so paths need no quoting) and returns what it
-- printed; the progress lines on stderr pass through to this terminal.
local function run(argv)
  table.insert(argv, 1, vtrun)
  local p = vt.process.spawn(argv)
  local lines = {}
  while true do
    local line = p:receive()
    if line == nil then break end
    lines[#lines + 1] = line
  end
  p:wait()
  return table.concat(lines, "\n")
end

local function number(text, pattern)
  local v = text:match(pattern)
  if v == nil then error("e11: no match for '" .. pattern .. "' in:\n" .. text, 0) end
  return tonumber(v)
end

local header = {"model", "processes", "shards", "s/step", "sent KB/step", "log KB/step", "logged %", "group audit",
                "1-process audit", "roots"}
local rows, csv = {}, {}
for _, model in ipairs(a.models) do
  local worlds = {{1, 1}}
  for _, w in ipairs(a.worlds) do worlds[#worlds + 1] = {w, a.shards} end
  for _, ws in ipairs(worlds) do
    local world, shards = ws[1], ws[2]
    local dir = string.format("%s/%s-w%d-s%d", tmp, model, world, shards)
    local args = {"model=" .. model, "steps=" .. a.steps, "shards=" .. shards, "dir=" .. dir}
    local argv = world > 1 and {"--nproc", tostring(world), example} or {example}
    for _, x in ipairs(args) do argv[#argv + 1] = x end
    local text = run(argv)
    local step = number(text, "%(([%d.]+) s/step%)")
    local sent = number(text, "ranks sent ([%d.]+) KB/step")
    local logs = number(text, "([%d.]+) KB of logs/step")
    local logged = number(text, "([%d.]+)%% of %d+ values logged")
    local group_corr = number(text, "auditor %(%d+ process[es]*, rank 0 on %S+%): (%d+) corrections")
    local group_illegit = number(text, "corrections, (%d+) illegitimate")
    local trainer_root = text:match("trainer root: (%x+)")
    local group_equal = text:find("roots equal", 1, true) ~= nil
    local solo_argv = {example, "role=audit", "profile=blocked"}
    for _, x in ipairs(args) do solo_argv[#solo_argv + 1] = x end
    local solo = run(solo_argv)
    local solo_corr = number(solo, "(%d+) corrections")
    local solo_equal = solo:match("auditor root: (%x+)") == trainer_root
    local verdict = (group_equal and solo_equal) and "equal" or "DIFFER"
    local row = {model, world, shards, string.format("%.4f", step), string.format("%.1f", sent), string.format("%.1f", logs),
                 string.format("%.3f", logged), string.format("%d corr, %d illegit", group_corr, group_illegit),
                 string.format("%d corr", solo_corr), verdict}
    rows[#rows + 1] = row
    csv[#csv + 1] = row
    print(table.concat(row, "  "))
    vt.fs.remove(dir)
  end
end
print()
print(lib.table(header, rows))
lib.csv(out .. "/e11_data_parallel.csv", header, csv)
vt.fs.remove(tmp)
for _, row in ipairs(rows) do
  if row[#row] ~= "equal" then
    print("ROOTS DIFFER")
    os.exit(1)
  end
end
