-- vt.nn: models written in Lua. The built-in MLP and ResNet written with vt.nn give the same
-- states and logs bit for bit; a Lua model replays to equal roots on other profiles, in
-- another process too; the spec commits to the architecture (a changed width changes the
-- hash, an auditor with another model file is refused with the module named, a spec whose
-- declared structure disagrees with its source is refused); bad sources get clear errors.
local T = require "vt.test"
-- Every store of this script lives here, removed when it ends.
local tmp = vt.fs.tmpdir("nn-test")

local s = T.suite("vt.nn")
local models = vt.nn.models_dir

local function spec_of(model, data, opts)
  opts = opts or {}
  return vt.spec{model = model, data = data, steps = opts.steps or 4, batch = opts.batch or 16,
                 checkpoint_every = 2, seed = 3, optim = vt.optim.sgd{lr = 0.05, momentum = 0.9},
                 round = opts.round}
end

local function train(spec, data, profile)
  local t = vt.trainer{spec = spec, data = data, store = vt.store.open(vt.fs.tmpdir("nn", tmp)), profile = profile}
  return t, t:run()
end

-- Every leaf's state digest and log digest of two runs (their roots differ: the specs do).
local function leaves(trainer)
  local out = {}
  local run = trainer:store():run(trainer:run_id())
  for i = 0, run:size() - 1 do
    local info = run:leaf_info(i)
    out[#out + 1] = info.state_digest .. "/" .. info.log_digest
  end
  return out
end

local function same_leaves(a, b, what)
  local la, lb = leaves(a), leaves(b)
  T.assert_eq(#la, #lb, what .. ": leaves")
  for i = 1, #la do T.assert_eq(la[i], lb[i], what .. ": state and log of leaf " .. (i - 1)) end
end

s:test("the MLP written with vt.nn equals the built-in MLP bit for bit", function()
  local data = vt.data.fashion_mnist{limit = 256}
  local builtin = spec_of(vt.models.mlp{hidden = {32, 16}}, data, {steps = 6})
  local lua = spec_of(vt.nn.model{file = models .. "mlp.lua", args = {hidden = "32,16"}}, data, {steps = 6})
  T.assert_true(builtin:hash() ~= lua:hash(), "the specs differ (model.type)")
  local ta, ra = train(builtin, data)
  local tb, rb = train(lua, data)
  T.assert_eq(ra.loss, rb.loss, "final loss")
  T.assert_eq(ra.logged, rb.logged, "logged values")
  same_leaves(ta, tb, "mlp")
end)

s:test("ResNet-18 and ResNet-50 written with vt.nn equal the built-in ones bit for bit", function()
  local data = vt.data.fashion_mnist{limit = 64}
  for _, depth in ipairs{18, 50} do
    local builtin = spec_of(vt.models.resnet{depth = depth, width = 4, in_channels = 1}, data, {steps = 2, batch = 4})
    local lua = spec_of(vt.nn.model{file = models .. "resnet.lua", args = {depth = depth, width = 4, in_channels = 1}},
                        data, {steps = 2, batch = 4})
    T.assert_eq(lua:parameters(), builtin:parameters(), "parameters")
    local ta, ra = train(builtin, data)
    local tb, rb = train(lua, data)
    T.assert_eq(ra.loss, rb.loss, "resnet-" .. depth .. " loss")
    same_leaves(ta, tb, "resnet-" .. depth)
  end
end)

-- Runs nn_party.lua in another vtrun process; returns its JSON result.
local function party(argv)
  table.insert(argv, 1, vt.executable())
  local child = vt.process.spawn(argv)
  local lines = {}
  while true do
    local line, why = child:receive(300)
    if not line then
      T.assert_eq(why, "closed", "the party's output")
      break
    end
    lines[#lines + 1] = line
  end
  T.assert_eq(child:wait(), 0, "party exit status: " .. table.concat(lines, "\n"))
  return vt.json.decode(lines[#lines])
end

local function write_spec(spec, dir)
  local path = dir .. "/spec.txt"
  local out = assert(io.open(path, "wb"))
  out:write(spec:canonical())
  out:close()
  return path
end

s:test("GPT-2 written with vt.nn equals the built-in GPT-2 bit for bit", function()
  local data = vt.data.text{path = vt.corpus, context = 16}
  local cfg = {layers = 2, d_model = 32, heads = 2, vocab = 256, context = 16}
  local builtin = spec_of(vt.models.gpt2(cfg), data, {steps = 3, batch = 4})
  local lua = spec_of(vt.nn.model{file = models .. "gpt2.lua", args = cfg}, data, {steps = 3, batch = 4})
  T.assert_eq(lua:get("model.module.lm_head"), "TiedLinear(weight=wte.weight)")
  local ta, ra = train(builtin, data)
  local tb, rb = train(lua, data)
  T.assert_eq(ra.loss, rb.loss, "gpt loss")
  same_leaves(ta, tb, "gpt")
  -- The same under a window with an absolute term: the magnitudes reach the same boundaries.
  local w = {round = {bits = 32, band = 0.25, alpha = 2 ^ -40}, steps = 2, batch = 4}
  local ta2 = train(spec_of(vt.models.gpt2(cfg), data, w), data)
  local tb2 = train(spec_of(vt.nn.model{file = models .. "gpt2.lua", args = cfg}, data, w), data)
  same_leaves(ta2, tb2, "gpt with magnitudes")
end)

s:test("a Lua CNN replays to equal roots on another profile and in another process", function()
  local data = vt.data.fashion_mnist{limit = 256}
  local spec = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 4}}, data,
                       {round = {band = 1 / 16}})
  local t, r = train(spec, data, "native")
  local a = vt.auditor{spec = spec, data = data, logs = t, profile = "splitk4",
                       store = vt.store.open(vt.fs.tmpdir("nn", tmp))}
  local ar = a:run()
  T.assert_eq(ar.root, r.root, "root replayed on splitk4")
  T.assert_eq(ar.illegitimate, 0, "illegitimate entries on splitk4")
  -- 'scalar' is a process-level profile: an auditor of its own that has only the spec's text.
  local dir = vt.fs.tmpdir("nn", tmp)
  local spec_file = write_spec(spec, dir)
  local logs = t:store():path()
  local run_id = t:run_id()
  t:store():close()
  local result = party({"--profile", "scalar", "nn_party.lua", "audit", spec_file, logs, run_id, dir .. "/auditor"})
  T.assert_eq(result.root, r.root, "root replayed on scalar in another process")
  T.assert_eq(result.illegitimate, 0, "illegitimate entries on scalar")
  -- Control: without the trainer's log the CNN's runs differ between the profiles.
  local _, other = train(spec, data, "splitk4")
  T.assert_true(other.root ~= r.root, "roots without logs differ between native and splitk4")
end)

s:test("data-parallel ranks and calibration workers rebuild a Lua model from the spec", function()
  local data = vt.data.fashion_mnist{limit = 256}
  local model = vt.nn.model{file = models .. "cnn.lua", args = {width = 4}}
  -- Two ranks (native and splitk4) train a sharded spec; one process on 'blocked' replays it.
  local sharded = vt.spec{model = model, data = data, steps = 4, batch = 16, shards = 2, checkpoint_every = 2, seed = 3}
  local dir = vt.fs.tmpdir("nn", tmp)
  local trained = party({"--nproc", "2", "nn_party.lua", "train", write_spec(sharded, dir), "-", "-", dir .. "/trainer"})
  local a = vt.auditor{spec = sharded, data = data, logs = vt.store.open(dir .. "/trainer", {read_only = true}),
                       logs_run = "run", store = vt.store.open(dir .. "/auditor"), profile = "blocked"}
  T.assert_eq(a:run{progress = false}.root, trained.root, "two ranks replayed by one process")
  -- Calibration with a process-level profile: its worker builds the model from the spec's text.
  local spec = spec_of(model, data, {round = {bits = 32, band = 0.25, alpha = 2 ^ -40}})
  local cal = vt.calibrate{spec = spec, data = {kind = "fashion_mnist", limit = 256}, profiles = {"native", "scalar"},
                           steps = 2, progress = false}
  T.assert_true(cal.round.boundaries["stage1.conv:fwd"] ~= nil, "a window for the Lua model's first convolution")
  T.assert_true(cal.round.boundaries["act:fwd"] ~= nil, "a window for its Tanh")
end)

s:test("the spec holds the architecture: widths change the hash, parsing rebuilds the model", function()
  local data = vt.data.fashion_mnist{limit = 64}
  local a = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 4}}, data)
  local b = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 6}}, data)
  T.assert_true(a:hash() ~= b:hash(), "another width, another hash")
  T.assert_eq(a:get("model.module.stage1.conv"), "Conv2d(in=1,out=4,kernel=3,stride=1,padding=1,bias=false)")
  T.assert_eq(a:get("model.state.classifier.weight"), "10,64")
  T.assert_eq(a:get("model.arg.width"), "4")
  -- A spec travels as its canonical text: another process rebuilds the model from it alone.
  local parsed = vt.spec.parse(a:canonical())
  T.assert_eq(parsed:hash(), a:hash(), "parsed hash")
  T.assert_eq(parsed:parameters(), a:parameters(), "parsed model parameters")
  -- The same source with another text (a comment) is another spec.
  local f = io.open(models .. "cnn.lua"):read("*a")
  local c = spec_of(vt.nn.model{source = f .. "\n-- changed\n", args = {width = 4}}, data)
  T.assert_true(c:hash() ~= a:hash(), "another source text, another hash")
end)

s:test("an auditor with another model is refused with the difference named", function()
  local data = vt.data.fashion_mnist{limit = 64}
  local spec = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 4}}, data, {steps = 2})
  local t = train(spec, data)
  local other = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 5}}, data, {steps = 2})
  T.assert_error(function()
    vt.auditor{spec = other, data = data, logs = t, store = vt.store.open(vt.fs.tmpdir("nn", tmp))}
  end, "model.module.stage1.conv is Conv2d%(in=1,out=5")
  local src = io.open(models .. "cnn.lua"):read("*a"):gsub("nn.Tanh%(%)", "nn.Sigmoid()")
  local edited = spec_of(vt.nn.model{source = src, args = {width = 4}}, data, {steps = 2})
  T.assert_error(function()
    vt.auditor{spec = edited, data = data, logs = t, store = vt.store.open(vt.fs.tmpdir("nn", tmp))}
  end, "model.module.act is Sigmoid here, Tanh in the logs")
  -- A source that differs only in its text is named by where it differs.
  local commented = io.open(models .. "cnn.lua"):read("*a"):gsub("local w = ", "local w = -- width\n")
  local other_text = spec_of(vt.nn.model{source = commented, args = {width = 4}}, data, {steps = 2})
  T.assert_error(function()
    vt.auditor{spec = other_text, data = data, logs = t, store = vt.store.open(vt.fs.tmpdir("nn", tmp))}
  end, "model.source differs from character %d+ %(line %d+%)")
end)

s:test("a spec whose declared structure disagrees with its source is refused", function()
  local data = vt.data.fashion_mnist{limit = 64}
  local text = spec_of(vt.nn.model{file = models .. "cnn.lua", args = {width = 4}}, data):canonical()
  local forged = text:gsub("model.state.classifier.weight=10,64", "model.state.classifier.weight=10,128")
  T.assert_error(function() vt.spec.parse(forged) end,
                 "model.state.classifier.weight is 10,128 in the spec, but model.source builds 10,64")
  -- Declaring less than the source builds: building stops at the declared size.
  local smaller = text:gsub("model.state.classifier.weight=10,64", "model.state.classifier.weight=10,32")
  T.assert_error(function() vt.spec.parse(smaller) end, "more parameter and buffer values than the spec's")
  local dropped = text:gsub("model.module.act=Tanh\n", "")
  T.assert_error(function() vt.spec.parse(dropped) end, "model.module.act %(Tanh%) is what model.source builds")
  local bad_escape = text:gsub("model.source=", "model.source=\\q")
  T.assert_error(function() vt.spec.parse(bad_escape) end, "unknown escape \\q")
  local bad_arg = text:gsub("model.arg.width=4", "model.arg.width=4.0")
  T.assert_error(function() vt.spec.parse(bad_arg) end, "model.arg.width must be")
end)

s:test("model sources get clear errors", function()
  local data = vt.data.fashion_mnist{limit = 64}
  local function model_error(source, pattern, opts)
    T.assert_error(function() spec_of(vt.nn.model{source = source, args = opts}, data) end, pattern)
  end
  model_error("return 42", "must return a vt.nn module")
  model_error("return vt.nn.Linear(", "does not compile")
  model_error("local f = io.open('x') return vt.nn.Linear(784, 10)", "global 'io'")
  model_error("os.exit(1)", "global 'os'")
  model_error("print(1) return vt.nn.ReLU()", "global 'print'")
  -- No pcall: a source must not catch the error that ends its instruction budget.
  model_error("pcall(error) return vt.nn.ReLU()", "global 'pcall'")
  model_error("local t = vt.tensor.zeros({1048576, 1048576}) return vt.nn.ReLU()", "at most 2%^26 elements")
  model_error("local t = vt.tensor.arange(1099511627776) return vt.nn.ReLU()", "at most 2%^26 elements")
  model_error("local t = vt.tensor.load('x.npy') return vt.nn.ReLU()", "field 'load'")
  model_error("local t = string.rep('x', 2147483648) return vt.nn.ReLU()", "at most 2%^24 bytes")
  T.assert_error(function()  -- method calls on strings, in the spec's own model state
    vt.spec.parse((spec_of(vt.nn.model{source = "local t = ('x'):rep(1048576) return vt.nn.Sequential{vt.nn.Flatten(), vt.nn.Linear(784, 10)}"}, data):canonical():gsub("1048576", "2147483648")))
  end, "at most 2%^24 bytes")
  model_error(string.dump(function() end), "not bytecode")
  model_error("local l = vt.nn.Linear(784, 10) return vt.nn.Sequential{vt.nn.Flatten(), l, l}",
              "placed twice")
  -- A forward that computes outside boundaries is refused, naming what to use.
  model_error([[
    local M = vt.nn.Module{kind = "Bad", init = function(self) self.fc = vt.nn.Linear(784, 10) end,
      forward = function(self, x) return self.fc(vt.nn.F.flatten(x)):tanh() end}
    return M()]], "tensor:tanh gives different bits.*vt.nn.Tanh")
  -- The model must produce class scores for the data's targets.
  model_error("return vt.nn.Sequential{vt.nn.Flatten(), vt.nn.Linear(784, 5)}",
              "5 class scores per target, fewer than the data's 10")
  model_error("return vt.nn.Sequential{vt.nn.Flatten(), vt.nn.Linear(700, 10)}", "forward fails")
  -- A source whose forward never returns stops at its instruction budget (in the host, the
  -- source's own building is the script's; in the spec's model state it is budgeted).
  model_error([[
    local M = vt.nn.Module{kind = "Loop", init = function(self) self.fc = vt.nn.Linear(784, 10) end,
      forward = function(self, x) while true do end end}
    return M()]], "budget of 2%^26 Lua instructions")
  T.assert_error(function() vt.nn.Linear(0, 3) end, "in must be an integer >= 1")
  T.assert_error(function() vt.nn.Conv2d(1, 3, 3, {strides = 2}) end, "unknown option 'strides'")
  T.assert_error(function() vt.nn.Linear(3, 2)(vt.tensor.zeros{1, 3}) end, "get them when a spec builds")
  T.assert_error(function() vt.nn.model{source = "return vt.nn.ReLU()", args = {t = {}}} end,
                 "args.t must be a number, string or boolean")
  T.assert_error(function()
    local M = vt.nn.Module{forward = function() end}
    local m = M()
    m.forward = vt.nn.ReLU()
  end, "cannot be named 'forward'")
end)

s:test("modules print their structure and parameter shapes", function()
  local net = vt.nn.Sequential{vt.nn.Conv2d(1, 4, 3, {padding = 1}), vt.nn.ReLU(),
                               vt.nn.Flatten(), vt.nn.Linear(4 * 28 * 28, 10):named("fc")}
  local text = tostring(net)
  T.assert_true(text:find("(0): Conv2d(in=1,out=4,kernel=3,stride=1,padding=1,bias=true)  weight [4, 1, 3, 3], bias [4]", 1, true), text)
  T.assert_true(text:find("(fc): Linear(in=3136,out=10,bias=true)  weight [10, 3136]", 1, true), text)
  T.assert_eq(net:parameter_count(), 4 * 9 + 4 + 3136 * 10 + 10)
  -- The shapes printed are the shapes the spec's built model has.
  local data = vt.data.fashion_mnist{limit = 64}
  local m = vt.nn.model{file = models .. "resnet.lua", args = {width = 4, in_channels = 1}}
  T.assert_eq(spec_of(m, data):parameters(), m.module:parameter_count())
end)

local _, failed = T.run({exit = false, cleanup = function() vt.fs.remove(tmp) end})
os.exit(failed == 0 and 0 or 1)
