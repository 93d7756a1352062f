-- vt.data.tensors (issue 21): data sets from tensors a user brings, from .npy files and
-- from tensors of a safetensors file; their digests, a verified run on one, and the errors.
local T = require "vt.test"
local s = T.suite("data.tensors")

local tmp = vt.fs.tmpdir("data-tensors-test")

-- 256 examples of 12 features labelled by a fixed random teacher (4 classes, 0-based).
local function example_set()
  local x = vt.tensor.randn({256, 12}, {seed = 3})
  local _, idx = x:matmul(vt.tensor.randn({12, 4}, {seed = 4})):max(2)
  return x, (idx - 1):long():view(-1)
end

s:test("a set from tensors: shape, classes, batches, and a digest of the content", function()
  local x, y = example_set()
  local d = vt.data.tensors{inputs = x, targets = y, name = "teacher"}
  T.assert_eq(#d, 256)
  T.assert_eq(d:name(), "tensors:teacher")
  T.assert_eq(d:input_shape(), {12})
  T.assert_eq(d:classes(), 4)
  local inputs, targets = d:get({1, 2, 256})
  T.assert_true(inputs[1] == x[1] and inputs[3] == x[256])
  T.assert_eq(targets:totable(), {y[1], y[2], y[256]})
  -- The digest is the content's: the same tensors give it, one changed label does not.
  T.assert_eq(vt.data.tensors{inputs = x:clone(), targets = y:clone()}:digest(), d:digest())
  local y2 = y:clone()
  y2[7] = (y[7] + 1) % 4
  T.assert_ne(vt.data.tensors{inputs = x, targets = y2}:digest(), d:digest())
  -- Shapes and classes are part of it too.
  T.assert_ne(vt.data.tensors{inputs = x:view(256, 3, 4), targets = y}:digest(), d:digest())
  T.assert_ne(vt.data.tensors{inputs = x, targets = y, classes = 5}:digest(), d:digest())
  -- Inputs of another float dtype are held as float64 (the digest of the float64 values).
  T.assert_eq(vt.data.tensors{inputs = x:float(), targets = y}:digest(),
              vt.data.tensors{inputs = x:float():double(), targets = y}:digest())
end)

s:test("the same set from .npy files and from a safetensors file", function()
  local x, y = example_set()
  local digest = vt.data.tensors{inputs = x, targets = y}:digest()
  x:save(tmp .. "/x.npy")
  y:save(tmp .. "/y.npy")
  T.assert_eq(vt.data.tensors{inputs = tmp .. "/x.npy", targets = tmp .. "/y.npy"}:digest(), digest)
  vt.safetensors.save(tmp .. "/d.safetensors", {inputs = x, labels = y})
  local f = tmp .. "/d.safetensors"
  T.assert_eq(vt.data.tensors{inputs = f .. "#inputs", targets = f .. "#labels"}:digest(), digest)
  T.assert_error(function() vt.data.tensors{inputs = f .. "#images", targets = f .. "#labels"} end,
                 "has no tensor 'images' (it has: inputs, labels)", true)
  T.assert_error(function() vt.data.tensors{inputs = tmp .. "/x.csv", targets = y} end,
                 "give a .npy file or FILE.safetensors#NAME", true)
  T.assert_error(function() vt.data.tensors{inputs = tmp .. "/missing.npy", targets = y} end, "missing.npy", true)
end)

s:test("a run on a tensor set replays on another profile to the same root, and other data is refused", function()
  local x, y = example_set()
  local data = vt.data.tensors{inputs = x, targets = y, name = "teacher"}
  local spec = vt.spec{model = vt.models.mlp{input_shape = {12}, hidden = {16}, classes = 4}, data = data,
                       optim = vt.optim.sgd{lr = 0.1}, batch = 16, steps = 6, seed = 1, checkpoint_every = 3}
  T.assert_eq(spec:get("data.kind"), "tensors")
  T.assert_eq(spec:get("data.digest"), data:digest())
  local trainer = vt.trainer{spec = spec, data = data, store = vt.store.open(tmp .. "/t"), profile = "native"}
  local t = trainer:run{progress = false}
  -- The auditor loads the same arrays from files, as another machine would.
  x:save(tmp .. "/ax.npy")
  y:save(tmp .. "/ay.npy")
  local same = vt.data.tensors{inputs = tmp .. "/ax.npy", targets = tmp .. "/ay.npy", name = "teacher"}
  local auditor = vt.auditor{spec = spec, data = same, logs = trainer, store = vt.store.open(tmp .. "/a"),
                             profile = "splitk4"}
  local r = auditor:run{progress = false}
  T.assert_eq(r.root, t.root)
  T.assert_eq(r.illegitimate, 0)
  local y2 = y:clone()
  y2[1] = (y[1] + 1) % 4
  T.assert_error(function()
    vt.auditor{spec = spec, data = vt.data.tensors{inputs = x, targets = y2, name = "teacher"}, logs = trainer,
               profile = "splitk4"}
  end, "digest", true)
  -- A model that does not fit the set is refused at vt.spec.
  T.assert_error(function()
    vt.spec{model = vt.models.mlp{input_shape = {10}, hidden = {16}, classes = 4}, data = data, steps = 1, batch = 16}
  end, "model.input_shape", true)
end)

s:test("token sets for language models: integer inputs, next-token targets", function()
  local rows = {}
  for i = 0, 63 do
    local row = {}
    for j = 0, 8 do row[#row + 1] = (i * 9 + j) % 50 end
    rows[#rows + 1] = row
  end
  local ids = vt.tensor(rows, {dtype = "int64"})
  local d = vt.data.tensors{inputs = ids:narrow(2, 1, 8), targets = ids:narrow(2, 2, 8)}
  T.assert_eq(d:classes(), 50)
  T.assert_eq(d:input_shape(), {8})
  local spec = vt.spec{model = vt.models.gpt2{layers = 1, d_model = 16, heads = 2, vocab = 50, context = 8},
                       data = d, steps = 2, batch = 4}
  local t = vt.trainer{spec = spec, data = d, store = vt.store.open(tmp .. "/gpt")}
  T.assert_eq(t:run{progress = false}.steps_run, 2)
end)

s:test("bad tensors are refused with the problem named", function()
  local x, y = example_set()
  local cases = {
    {{inputs = x, targets = y:narrow(1, 1, 100)}, "targets must have one row per example (256)"},
    {{inputs = x:view(-1), targets = y}, "at least 2 dimensions"},
    {{inputs = x, targets = y:double()}, "targets must be integer labels"},
    {{inputs = x, targets = (y - 1):long()}, "labels must be >= 0"},
    {{inputs = x, targets = y:double()}, "targets must be integer labels, got float64"},
    {{inputs = x, targets = y, classes = 3}, "outside [0, classes = 3)"},
    {{inputs = x / 0, targets = y}, "is NaN or infinite"},
    {{inputs = x, targets = y, name = "a=b"}, "name must be printable ASCII without '=' or ':'"},
    {{inputs = x}, "option 'targets' is required"},
    {{inputs = x, targets = y, shape = 2}, "unknown option 'shape'"},
  }
  for _, c in ipairs(cases) do
    T.assert_error(function() vt.data.tensors(c[1]) end, c[2], true)
  end
end)

T.run{cleanup = function() vt.fs.remove(tmp) end}
