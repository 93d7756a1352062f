-- vt.spec, vt.trainer, vt.auditor from Lua: equal roots across profiles, specs, errors.
local T = require "vt.test"
local s = T.suite("train")

local dir = os.tmpname() .. ".train"
os.execute("rm -rf " .. dir .. " && mkdir -p " .. dir)
local data = vt.data.synthetic{size = 256, input_shape = {20}, classes = 4, seed = 2}

local function make_spec(overrides)
  local o = {
    model = vt.models.mlp{input_shape = {20}, hidden = {16}, classes = 4},
    data = data, optim = vt.optim.sgd{lr = 0.1, momentum = 0.9},
    batch = 16, steps = 12, seed = 3, checkpoint_every = 5,
  }
  for k, v in pairs(overrides or {}) do o[k] = v end
  return vt.spec(o)
end

s:test("a spec is canonical, hashed and parses back", function()
  local spec = make_spec()
  T.assert_eq(#spec:hash(), 64)
  T.assert_eq(spec:get("model.type"), "mlp")
  T.assert_eq(spec:get("round.fwd.band"), "0.25")
  T.assert_eq(spec:get("data.digest"), data:digest())
  local again = vt.spec.parse(spec:canonical())
  T.assert_eq(again:hash(), spec:hash())
  T.assert_true(spec:canonical():find("batch=16\n", 1, true) ~= nil)
  T.assert_ne(make_spec{seed = 4}:hash(), spec:hash())
  T.assert_eq(make_spec{round = {bits = 26, band = 0, alpha = 1e-12}}:get("round.bits"), "26")
  T.assert_true(tostring(spec):find("vt.Spec(mlp on synthetic", 1, true) ~= nil)
end)

s:test("spec errors name the field", function()
  T.assert_error(function() return make_spec{stepz = 3} end, "unknown option 'stepz'", true)
  T.assert_error(function() return make_spec{batch = 0} end, "field 'batch' must be an integer in [1", true)
  T.assert_error(function() return make_spec{optim = vt.optim.sgd{lr = -1}} end, "lr must be a finite number > 0", true)
  T.assert_error(function() return make_spec{round = {bits = 40}} end, "round.bits", true)
  T.assert_error(function() return make_spec{round = {band = 0.7}} end, "band", true)
  T.assert_error(function() return vt.models.mlp{hiden = {3}} end, "unknown option 'hiden'", true)
  T.assert_error(function() return vt.spec.parse("batch=1\n") end, "missing field 'model.type'", true)
  T.assert_error(function() return vt.spec.parse("b=1\na=2\n") end, "not sorted", true)
end)

s:test("trainer and auditor on different profiles end with equal roots", function()
  local spec = make_spec()
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/t1"), profile = "blocked"}
  local seen = 0
  for step, report in trainer:steps() do
    seen = seen + 1
    T.assert_eq(step, seen)
    T.assert_true(report.elements > 0 and report.logged > 0 and report.log_bytes > 0)
    T.assert_true(report.boundaries["fc0:fwd"] ~= nil and report.boundaries["fc1.weight:update"] ~= nil)
    -- Each boundary's seconds are its share of times.boundaries.
    local sum = 0
    for name, b in pairs(report.boundaries) do
      T.assert_true(b.seconds > 0, name .. " took no time")
      sum = sum + b.seconds
    end
    T.assert_true(sum <= report.times.boundaries * (1 + 1e-9) and sum >= 0.99 * report.times.boundaries,
                  "boundaries' seconds " .. sum .. " against times.boundaries " .. report.times.boundaries)
  end
  T.assert_eq(seen, 12)
  T.assert_true(trainer:done())
  local auditor = vt.auditor{spec = spec, data = data, logs = trainer, profile = "splitk4",
                             store = vt.store.open(dir .. "/a1")}
  local r = auditor:run{progress = false}
  T.assert_eq(r.illegitimate, 0)
  T.assert_eq(r.root, trainer:root())
  T.assert_eq(vt.train.first_differing_leaf(trainer:store(), "run", auditor:store(), "run"), nil)
  local a, b = trainer:state(), auditor:state()
  for name, t in pairs(a) do T.assert_true(t:equal(b[name]), name) end
end)

s:test("an auditor copies the logged directions it would not have taken, and ends with the trainer's root", function()
  -- Two profiles rarely straddle a midpoint in a short run (the run above needs no
  -- correction), so the trainer here takes the other legitimate direction wherever its log
  -- allows (deviate flip_within): every such entry is a correction the auditor must copy.
  local spec = make_spec{steps = 4}
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/t-flip"), profile = "blocked",
                             deviate = {kind = "flip_within", amount = 3}}
  local tr = trainer:run{progress = false}
  T.assert_true(tr.steered > 0, "the trainer flipped values")
  local auditor = vt.auditor{spec = spec, data = data, logs = trainer, profile = "splitk4",
                             store = vt.store.open(dir .. "/a-flip")}
  local r = auditor:run{progress = false}
  T.assert_true(r.corrections > 0, "corrections: " .. r.corrections)
  T.assert_eq(r.illegitimate, 0)
  T.assert_eq(r.root, trainer:root())
  -- The control: the honest run of the same spec ends elsewhere, so the copied directions
  -- mattered.
  local honest = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/t-flip-honest"), profile = "blocked"}
  honest:run{progress = false}
  T.assert_ne(honest:root(), trainer:root())
end)

s:test("an auditor whose spec is not the logs' is refused, the differing fields named", function()
  -- Replaying under another spec would look exactly like a cheating trainer.
  local spec = make_spec{steps = 4}
  local store = vt.store.open(dir .. "/t-spec")
  local trainer = vt.trainer{spec = spec, data = data, store = store}
  trainer:run{progress = false}
  T.assert_error(function() vt.auditor{spec = make_spec{steps = 4, optim = vt.optim.sgd{lr = 0.2, momentum = 0.9}},
                                       data = data, logs = trainer} end,
                 "optim.lr is 0.20000000000000001 here, 0.10000000000000001 in the logs", true)
  T.assert_error(function() vt.auditor{spec = make_spec{steps = 4, round = {bits = 32, band = 0.125}}, data = data,
                                       logs = store} end, "round.bwd.band is 0.125 here, 0.25 in the logs", true)
  T.assert_error(function() vt.auditor{spec = spec, data = data, logs = store, logs_run = "other"} end,
                 "holds no run 'other' to replay", true)
  -- The trainer's own store refuses a second spec the same way.
  T.assert_error(function() vt.trainer{spec = make_spec{steps = 5}, data = data, store = store} end,
                 "steps is 5 here, 4 in the store", true)
  -- The same spec is accepted.
  local auditor = vt.auditor{spec = spec, data = data, logs = store, store = vt.store.open(dir .. "/a-spec")}
  T.assert_eq(auditor:run{progress = false}.root, trainer:root())
end)

s:test("a window for a boundary the model does not have is refused at the first step, before it is stored", function()
  local spec = make_spec{steps = 4, round = {bits = 32, band = 0.25, boundaries = {["fc9:fwd"] = {band = 0, alpha = 1e-12},
                                                                                 ["fc0:fwd"] = {band = 0.125}}}}
  local store = vt.store.open(dir .. "/t-typo")
  local trainer = vt.trainer{spec = spec, data = data, store = store}
  local message = "round.boundaries names boundaries the model did not reach in the run's first step: 'fc9:fwd' (nearest: fc0:fwd, fc1:fwd"
  T.assert_error(function() trainer:step() end, message, true)
  T.assert_error(function() trainer:step() end, message, true)  -- and it stays refused
  T.assert_eq(store:run("run"):info().steps_written, 0)
  T.assert_error(function() vt.auditor{spec = spec, data = data, logs = "given"}:step({}) end, message, true)
  -- Every name a model has is accepted.
  local ok = make_spec{steps = 2, round = {bits = 32, band = 0.25, boundaries = {["fc1.weight:grad"] = {band = 0.125},
                                                                               ["fc0.bias:update"] = {band = 0, alpha = 0}}}}
  vt.trainer{spec = ok, data = data, store = vt.store.open(dir .. "/t-names")}:step()
end)

s:test("run() on a resumed run says from which step its totals count", function()
  local spec = make_spec{steps = 6, checkpoint_every = 2}
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/t-from")}
  local full = trainer:run{progress = false}
  T.assert_eq(full.from_step, 1)
  T.assert_eq(full.steps_run, 6)
  local store = vt.store.open(dir .. "/a-from")
  local first = vt.auditor{spec = spec, data = data, logs = trainer, store = store}
  first:step()
  first:step()
  first:step()  -- steps 1-3 stored; the last checkpoint is step 2's
  first = nil
  collectgarbage("collect")
  local again = vt.auditor{spec = spec, data = data, logs = trainer, store = store}
  local r = again:run{progress = false}
  T.assert_eq(r.from_step, 3)  -- rolled back to leaf 1 (step 2), so steps 3-6 ran here
  T.assert_eq(r.steps_run, 4)
  T.assert_eq(r.root, trainer:root())
end)

s:test("a finished run is whole in its store when the last step returns, checkpoints behind or not", function()
  -- Checkpoints go into the store on its write-behind thread, but the run's last leaf is
  -- written before the last step returns: a reader that opens the store then (or a script that
  -- copies its directory) finds the whole run, with the trainer's root. A leaf written behind
  -- before that is in the store for every later call on it.
  local spec = make_spec{steps = 7, checkpoint_every = 2}
  local store = vt.store.open(dir .. "/t-whole")
  local trainer = vt.trainer{spec = spec, data = data, store = store}
  for _ = 1, 6 do trainer:step() end
  T.assert_eq(store:run("run"):info().leaves, 4)  -- leaves 0-3 (steps 2, 4, 6), the last behind
  trainer:step()
  local reader = vt.store.open(dir .. "/t-whole", {read_only = true})
  local info = reader:run("run"):info()
  T.assert_true(info.complete)
  T.assert_eq(info.leaves, 5)
  T.assert_eq(reader:run("run"):root(), trainer:root())
  reader:close()
  store:close()
end)

s:test("a model that does not fit the data is refused when the spec is made", function()
  local base = {data = data, optim = vt.optim.sgd{lr = 0.1}, batch = 8, steps = 2}
  local function spec_with(model, d)
    local o = {}
    for k, v in pairs(base) do o[k] = v end
    o.model, o.data = model, d or data
    return vt.spec(o)
  end
  T.assert_error(function() spec_with(vt.models.mlp{input_shape = {21}, hidden = {8}, classes = 4}) end,
                 "model.input_shape 21 has 21 values, the data's examples [20] have 20", true)
  T.assert_error(function() spec_with(vt.models.mlp{input_shape = {20}, hidden = {8}, classes = 3}) end,
                 "model.classes 3 is fewer than the data's 4 classes (labels are 0-based, up to 3)", true)
  local images = vt.data.synthetic{size = 16, input_shape = {1, 8, 8}, classes = 4, seed = 1}
  T.assert_error(function() spec_with(vt.models.resnet{depth = 18, width = 2, in_channels = 3, classes = 4}, images) end,
                 "model.in_channels 3 does not match the data's 1 channels", true)
  T.assert_error(function() spec_with(vt.models.resnet{depth = 18, width = 2, in_channels = 1, classes = 4}) end,
                 "resnet takes images [C, H, W]; the data's examples are [20]", true)
  local text = vt.data.text{path = vt.corpus, context = 32}
  T.assert_error(function() spec_with(vt.models.gpt2{layers = 1, d_model = 8, heads = 1, vocab = 256, context = 16}, text) end,
                 "the data's sequences of 32 tokens exceed model.context 16", true)
  T.assert_error(function() spec_with(vt.models.gpt2{layers = 1, d_model = 8, heads = 1, vocab = 100, context = 32}, text) end,
                 "model.vocab 100 is fewer than the data's 256 token values", true)
  -- What fits is accepted: more classes than labels, an MLP that flattens another shape.
  spec_with(vt.models.mlp{input_shape = {4, 5}, hidden = {8}, classes = 10})
  spec_with(vt.models.gpt2{layers = 1, d_model = 8, heads = 1, vocab = 256, context = 64}, text)
end)

s:test("run() reports progress by role and profile, a line per tenth when piped, and metrics as JSON lines", function()
  local script = dir .. "/progress.lua"
  local f = assert(io.open(script, "w"))
  f:write([[
local data = vt.data.synthetic{size = 256, input_shape = {20}, classes = 4, seed = 2}
local spec = vt.spec{model = vt.models.mlp{input_shape = {20}, hidden = {16}, classes = 4}, data = data,
                     optim = vt.optim.sgd{lr = 0.1}, batch = 16, steps = 40, seed = 3, checkpoint_every = 5}
local dir = ...
local t = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/p-t"), profile = "blocked"}
t:run{metrics = dir .. "/metrics.jsonl"}
vt.auditor{spec = spec, data = data, logs = t, profile = "splitk4"}:run{}
]])
  f:close()
  local p = io.popen(string.format("%q %q %q 2>&1 | cat", vt.executable(), script, dir))
  local out = p:read("*a")
  p:close()
  local trainer_lines, auditor_lines = 0, 0
  for line in out:gmatch("[^\n]+") do
    if line:find("^trainer blocked %d+/40") then trainer_lines = trainer_lines + 1 end
    if line:find("^auditor splitk4 %d+/40") then auditor_lines = auditor_lines + 1 end
  end
  T.assert_eq(trainer_lines, 10, out)
  T.assert_eq(auditor_lines, 10, out)
  T.assert_true(out:find("trainer blocked 40/40", 1, true) ~= nil, out)
  T.assert_true(out:find("\r", 1, true) == nil, "no carriage returns when piped")
  local steps = {}
  for line in io.lines(dir .. "/metrics.jsonl") do
    local m = vt.json.decode(line)
    steps[#steps + 1] = m.step
    T.assert_eq(m.role, "trainer")
    T.assert_true(m.loss > 0 and m.logged >= 0 and m.steerable >= 0 and m.seconds >= 0, line)
  end
  T.assert_eq(#steps, 40)
  T.assert_eq(steps[40], 40)
  T.assert_error(function() vt.trainer{spec = make_spec(), data = data, store = vt.store.open(dir .. "/p-bad")}:run{progress = 3} end,
                 "option 'progress' must be true, false, \"bar\" or \"lines\"", true)
end)

s:test("state exports to safetensors and loads back bit for bit", function()
  local spec = make_spec{steps = 3}
  local t = vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/t3")}
  t:run{progress = false}
  local path = dir .. "/weights.safetensors"
  t:export(path)
  local tensors, meta = vt.safetensors.load(path)
  T.assert_eq(meta.spec_hash, spec:hash())
  T.assert_eq(meta.step, "3")
  for name, value in pairs(t:state()) do
    T.assert_eq(tensors[name]:dtype(), "float32")
    T.assert_true(tensors[name]:double():equal(value), name)
  end
  vt.safetensors.save(path, {b = vt.tensor{1, 2}, a = vt.tensor({{true}})}, {note = "x"})
  local back, m = vt.safetensors.load(path)
  T.assert_eq(back.b, vt.tensor{1, 2})
  T.assert_eq(m.note, "x")
  local f = io.open(path, "wb")
  f:write("\255\255\255\255\0\0\0\0{}")
  f:close()
  T.assert_error(function() return vt.safetensors.load(path) end, "header length", true)
end)

s:test("a run can start from imported safetensors weights, committed in the spec", function()
  local first = vt.trainer{spec = make_spec{steps = 4}, data = data, store = vt.store.open(dir .. "/pre")}
  first:run{progress = false}
  local weights = dir .. "/pretrained.safetensors"
  first:export(weights)
  local spec = make_spec{init = weights}
  T.assert_eq(#spec:get("model.init"), 64)
  T.assert_ne(spec:hash(), make_spec():hash())
  local t = vt.trainer{spec = spec, data = data, init = weights, store = vt.store.open(dir .. "/ft")}
  local start = t:state()
  for name, value in pairs(first:state()) do T.assert_true(start[name]:equal(value), name) end
  t:run{progress = false}
  local a = vt.auditor{spec = spec, data = data, init = weights, logs = t, profile = "splitk4",
                       store = vt.store.open(dir .. "/ft-a")}
  T.assert_eq(a:run{progress = false}.root, t:root())
  T.assert_error(function() return vt.trainer{spec = spec, data = data, store = vt.store.open(dir .. "/x1")} end,
                 "pass their safetensors file", true)
  local other = dir .. "/other.safetensors"
  vt.trainer{spec = make_spec{steps = 1, seed = 9}, data = data, store = vt.store.open(dir .. "/o")}:export(other)
  T.assert_error(function() return vt.trainer{spec = spec, data = data, init = other, store = vt.store.open(dir .. "/x2")} end,
                 "the spec requires", true)
  vt.safetensors.save(other, {["fc0.weight"] = vt.tensor.zeros(3)})
  T.assert_error(function() return make_spec{init = other} end, "has no tensor 'fc0.bias'", true)
  local wrong = first:state()
  wrong["fc0.weight"] = vt.tensor.zeros(3)
  vt.safetensors.save(other, wrong)
  T.assert_error(function() return make_spec{init = other} end, "has shape [3], the model needs [16, 20]", true)
  wrong = first:state()
  wrong["extra"] = vt.tensor.zeros(1)
  vt.safetensors.save(other, wrong)
  T.assert_error(function() return make_spec{init = other} end, "tensor(s) the model does not, e.g. 'extra'", true)
end)

s:test("evaluate: accuracy, and a trigger's success rate on image data", function()
  local images = vt.data.synthetic{size = 64, input_shape = {1, 8, 8}, classes = 4, seed = 5}
  local spec = vt.spec{model = vt.models.mlp{input_shape = {1, 8, 8}, hidden = {8}, classes = 4}, data = images,
                       batch = 8, steps = 2, seed = 1}
  local r = vt.trainer{spec = spec, data = images, mode = "fp64"}
  r:run{progress = false}
  local clean = r:evaluate(images, {limit = 64})
  T.assert_eq(clean.examples, 64)
  T.assert_true(clean.accuracy >= 0 and clean.accuracy <= 1)
  local trig = r:evaluate(images, {limit = 64, trigger = 2})
  -- Examples labelled 2 are left out; the rest count as correct when called 2.
  local all = {}
  for i = 1, 64 do all[i] = i end
  local _, y = images:get(all)
  local others = y:ne(2):long():sum()  -- (a number)
  T.assert_eq(trig.examples, others)
  T.assert_true(trig.examples < 64)
  T.assert_true(trig.accuracy >= 0 and trig.accuracy <= 1)
  T.assert_ne(trig.loss, clean.loss)
  T.assert_error(function() r:evaluate(images, {trigger = 4}) end, "trigger must be a class in [0, 4), got 4", true)
  T.assert_error(function() r:evaluate(data, {trigger = 0}) end, "trigger needs image data", true)
  T.assert_error(function() r:evaluate(images, {triger = 0}) end, "unknown option 'triger'", true)
end)

s:test("runner errors", function()
  local spec = make_spec()
  local st = vt.store.open(dir .. "/t2")
  T.assert_error(function() return vt.trainer{spec = spec, data = data, store = st, profile = "warp9"} end,
                 "unknown profile 'warp9'", true)
  T.assert_error(function() return vt.trainer{spec = spec, store = st} end, "option 'data' is required", true)
  local other = vt.data.synthetic{size = 256, input_shape = {20}, classes = 4, seed = 9}
  T.assert_error(function() return vt.trainer{spec = spec, data = other, store = st} end, "the spec requires", true)
  -- The spec's readable data fields must describe the data set with its digest: another name,
  -- or a field the data set does not have, is refused (before, a spec could say it trained on
  -- one data set and train on another, and one run had many spec hashes).
  local renamed = vt.spec.parse((spec:canonical():gsub("data%.name=[^\n]*", "data.name=synthetic:other")))
  T.assert_error(function() return vt.trainer{spec = renamed, data = data, mode = "rounded"} end,
                 "is not the spec's data.name", true)
  local lines = {}
  for line in spec:canonical():gmatch("[^\n]+") do lines[#lines + 1] = line end
  lines[#lines + 1] = "data.subset=first-100"
  table.sort(lines)
  local extra = vt.spec.parse(table.concat(lines, "\n") .. "\n")
  T.assert_error(function() return vt.trainer{spec = extra, data = data, mode = "rounded"} end,
                 "spec field 'data.subset' is not a setting of data set", true)
  local t = vt.trainer{spec = spec, data = data, store = st}
  t:run{progress = false}
  T.assert_error(function() return t:step() end, "is complete", true)
end)

-- A 2-step spec and the records of its first step, trained into the store `name`.
local function first_step_records(name)
  local spec = make_spec{steps = 2, checkpoint_every = 2}
  local st = vt.store.open(dir .. "/" .. name)
  vt.trainer{spec = spec, data = data, store = st}:step()
  return spec, st:run("run"):step(1)
end

s:test("an auditor counts records it cannot decode as mismatches, naming the first in the trainer's order", function()
  local spec, records = first_step_records("decode")
  T.assert_true(#records > 4, "records of step 1: " .. #records)
  -- The records decoded intact replay to the trainer's step.
  local good = vt.auditor{spec = spec, data = data, logs = "given"}
  T.assert_eq(good:step(records).illegitimate, 0)
  -- Two damaged log records (past the trace): the earlier one is named, whatever the threads do.
  local damaged, first, second = {}, nil, nil
  for i, r in ipairs(records) do
    damaged[i] = {boundary = r.boundary, call = r.call, value = r.value}
    if r.boundary ~= "~trace" and #r.value > 8 then
      if first == nil then
        first = i
      elseif second == nil and i > first + 1 then
        second = i
      end
    end
  end
  T.assert_true(first ~= nil and second ~= nil, "two log records to damage")
  damaged[first].value = damaged[first].value:sub(1, 7)
  damaged[second].value = "garbage!" .. damaged[second].value
  -- Evidence against the trainer (it committed those bytes), not a failed replay.
  local auditor = vt.auditor{spec = spec, data = data, logs = "given"}
  local report = auditor:step(damaged)
  T.assert_true(report.log_mismatches >= 2, "mismatches: " .. report.log_mismatches)
  local named = "step 1, record '" .. records[first].boundary .. "' call " .. records[first].call .. " could not be decoded"
  T.assert_true(report.log_mismatch:find(named, 1, true) ~= nil, report.log_mismatch)
end)

s:test("a second trace record, or one at another call, is a mismatch", function()
  local spec, records = first_step_records("traces")
  local trace
  for _, r in ipairs(records) do if r.boundary == "~trace" then trace = r end end
  T.assert_true(trace ~= nil and trace.call == 0)
  for _, call in ipairs{0, 5} do
    local extra = {}
    for i, r in ipairs(records) do extra[i] = {boundary = r.boundary, call = r.call, value = r.value} end
    extra[#extra + 1] = {boundary = "~trace", call = call, value = trace.value}
    local report = vt.auditor{spec = spec, data = data, logs = "given"}:step(extra)
    T.assert_true(report.log_mismatches >= 1, "call " .. call .. ": mismatches " .. report.log_mismatches)
    T.assert_true(report.log_mismatch:find("one trace record, at call 0", 1, true) ~= nil, report.log_mismatch)
  end
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf " .. dir)
os.exit(failed == 0 and 0 or 1)
