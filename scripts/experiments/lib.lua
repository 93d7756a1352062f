-- Shared pieces of the experiment scripts (E1-E9): the models, argument parsing, tables,
-- CSV/JSON output and gnuplot plots. Each experiment writes into its output directory
-- (default results/<name>/ under the current directory).
local M = {}

M.corpus = vt.corpus

-- The models: small ones by default (minutes on 2 cores), the paper's sizes as options.
function M.setup(name, overrides)
  overrides = overrides or {}
  local s
  if name == "mlp" then
    s = {recipe = {kind = "fashion_mnist", limit = 8192},
         model = vt.models.mlp{input_shape = {1, 28, 28}, hidden = {128, 64}, classes = 10},
         optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 64, eval = {kind = "fashion_mnist", split = "test", limit = 2048}}
  elseif name == "resnet" then
    s = {recipe = {kind = "fashion_mnist", limit = 8192},
         model = vt.models.resnet{depth = 18, width = 16, in_channels = 1, classes = 10},
         optim = vt.optim.sgd{lr = 0.05, momentum = 0.9, weight_decay = 5e-4}, batch = 32,
         eval = {kind = "fashion_mnist", split = "test", limit = 512}}
  elseif name == "gpt" then
    s = {recipe = {kind = "text", path = M.corpus, context = 64},
         model = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64},
         optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01}, batch = 8}
  elseif name == "resnet50" then
    s = {recipe = {kind = "fashion_mnist", limit = 2048},
         model = vt.models.resnet{depth = 50, width = 64, in_channels = 1, classes = 10},
         optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 8}
  elseif name == "gpt2" then
    s = {recipe = {kind = "text", path = M.corpus, context = 64},
         model = vt.models.gpt2{layers = 12, d_model = 768, heads = 12, vocab = 50257, context = 64},
         optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01}, batch = 8}
  else
    error("unknown model '" .. tostring(name) .. "' (valid: mlp, resnet, gpt, resnet50, gpt2)", 2)
  end
  s.name = name
  for k, v in pairs(overrides) do s[k] = v end
  s.data = vt.game.data(s.recipe)
  if s.eval == nil and s.recipe.kind == "text" then s.eval = s.recipe end
  return s
end

-- A spec of `setup` with `steps`, the round table and any other spec fields.
function M.spec(s, steps, round, extra)
  local fields = {model = s.model, data = s.data, optim = s.optim, batch = s.batch, steps = steps, seed = 1,
                  checkpoint_every = 5, round = round}
  for k, v in pairs(extra or {}) do fields[k] = v end
  return vt.spec(fields)
end

-- key=value command-line arguments over defaults: `vtrun e3.lua model=gpt steps=10` (vt.args).
function M.args(defaults, args)
  return vt.args(defaults, args)
end

function M.outdir(name, dir)
  dir = dir ~= "" and dir or ("results/" .. name)
  vt.fs.mkdir(dir)
  return dir
end

-- The machine a figure was measured on: CPU model, ATen's vector width, the BLAS library
-- and the profile the script started under. Every experiment prints it above its table, so
-- a figure in EXPERIMENTS.md names its CPU. Taken when lib.lua loads, before a script
-- switches profiles.
local function describe_machine()
  local cpu = "unknown CPU"
  local f = io.open("/proc/cpuinfo")
  if f then
    for line in f:lines() do
      local name = line:match("^model name%s*:%s*(.-)%s*$")
      if name then cpu = name break end
    end
    f:close()
  end
  local p = vt.profile()
  local blas = tostring(p.blas_library)
  local resolved = vt.fs.realpath(blas)
  if resolved then blas = resolved end
  return string.format("%s; ATen %s; BLAS %s; profile %s; %d thread(s)", cpu, tostring(p.aten_capability), blas, p.name,
                       vt.threads())
end
local machine = describe_machine()
function M.machine() return machine end

-- A fresh directory for an experiment's stores; the experiment removes it (vt.fs.remove).
function M.tmpdir()
  return vt.fs.tmpdir("vtrun-experiment")
end

-- Prints rows (arrays of values) under a header, columns padded.
function M.table(header, rows)
  local widths = {}
  local function cell(v)
    if type(v) == "number" then
      if v == math.floor(v) and math.abs(v) < 1e15 then return string.format("%d", v) end
      if math.abs(v) >= 1000 and math.abs(v) < 1e15 then return string.format("%.0f", v) end
      if math.abs(v) >= 1e-3 then return string.format("%.4g", v) end
      if v == 0 then return "0" end
      return string.format("%.3e", v)
    end
    return tostring(v == nil and "-" or v)
  end
  local text = {header}
  for _, r in ipairs(rows) do
    local t = {}
    for i = 1, #header do t[i] = cell(r[i]) end
    text[#text + 1] = t
  end
  for _, r in ipairs(text) do
    for i, c in ipairs(r) do widths[i] = math.max(widths[i] or 0, #c) end
  end
  for _, r in ipairs(text) do
    local parts = {}
    for i, c in ipairs(r) do parts[i] = string.format("%-" .. widths[i] .. "s", c) end
    print(table.concat(parts, "  "))
  end
end

function M.csv(path, header, rows)
  local f = assert(io.open(path, "w"))
  f:write(table.concat(header, ","), "\n")
  for _, r in ipairs(rows) do
    local t = {}
    for i = 1, #header do
      local v = r[i]
      t[i] = v == nil and "" or (type(v) == "number" and string.format("%.17g", v) or tostring(v))
    end
    f:write(table.concat(t, ","), "\n")
  end
  f:close()
end

function M.json(path, value)
  local f = assert(io.open(path, "w"))
  f:write(vt.json.encode(value, {indent = 1}), "\n")
  f:close()
end

-- Draws a PNG with gnuplot from a CSV: series = { {column=, title=}, ... } against column 1.
-- Returns false (with a note) when gnuplot is missing.
function M.plot(png, csv, options)
  if os.execute("command -v gnuplot > /dev/null 2>&1") ~= 0 and os.execute("command -v gnuplot > /dev/null 2>&1") ~= true then
    print("(gnuplot not found: no plot " .. png .. ")")
    return false
  end
  local lines = {
    "set terminal png size 900,560",
    string.format("set output '%s'", png),
    "set datafile separator ','",
    "set key top left",
    "set grid",
    string.format("set title '%s'", options.title or ""),
    string.format("set xlabel '%s'", options.xlabel or ""),
    string.format("set ylabel '%s'", options.ylabel or ""),
  }
  if options.logy then lines[#lines + 1] = "set logscale y" end
  if options.y2label then lines[#lines + 1] = string.format("set y2label '%s'; set y2tics; set ytics nomirror", options.y2label) end
  local plots = {}
  for _, s in ipairs(options.series) do
    plots[#plots + 1] = string.format("'%s' using 1:%d with %s title '%s'%s", csv, s.column, s.style or "linespoints", s.title,
                                      s.y2 and " axes x1y2" or "")
  end
  lines[#lines + 1] = "plot " .. table.concat(plots, ", ")
  local script = os.tmpname()
  local f = assert(io.open(script, "w"))
  f:write(table.concat(lines, "\n"), "\n")
  f:close()
  local ok = os.execute("gnuplot '" .. script .. "'")
  os.remove(script)
  return ok == 0 or ok == true
end

-- L2 distance between two state tables ({name = tensor}), over every tensor.
function M.l2(a, b)
  local sum = 0
  for name, t in pairs(a) do
    local d = (t:double() - b[name]:double())
    sum = sum + (d * d):sum()
  end
  return math.sqrt(sum)
end

-- The record bytes of a stored step, without its trace: {sizes per record}, total.
function M.step_records(run, step)
  local out = {}
  for _, r in ipairs(run:step(step)) do
    if r.boundary ~= "~trace" then out[#out + 1] = r end
  end
  return out
end

return M
