-- Per-element magnitudes reach the boundaries they are made for (ROUNDING.md "Magnitudes"):
-- with a window that has an absolute term, every product (forward and input gradients),
-- statistic, norm and softmax output, the log-softmax gradient and every parameter gradient
-- is rounded against its own magnitude, in each of its calls; under the paper's window
-- (alpha = 0) no magnitude is computed at all (the control). A boundary that silently lost
-- its magnitude would fall back to the tensor's largest value and log far more.
local T = require "vt.test"
-- Every store of this script lives here, removed when it ends.
local tmp = vt.fs.tmpdir("magnitude-test")

local s = T.suite("magnitudes")

local function one_step(model, data, alpha)
  local w = {band = 0, alpha = alpha}
  local spec = vt.spec{model = model, data = data, optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 8,
                       steps = 1, seed = 1, checkpoint_every = 1,
                       round = {bits = 32, fwd = w, bwd = w, grad = w, update = {band = 0.25, alpha = 0}}}
  local t = vt.trainer{spec = spec, data = data, store = vt.store.open(vt.fs.tmpdir("magnitude", tmp))}
  return t:step().boundaries
end

-- Every boundary named (and, for patterns, at least one matching) uses a magnitude in all calls.
local function check(b, names)
  for _, pattern in ipairs(names) do
    local seen = 0
    for name, st in pairs(b) do
      if name:match(pattern) then
        seen = seen + 1
        T.assert_eq(st.magnitudes, st.calls, name .. ": calls with a magnitude")
      end
    end
    T.assert_true(seen > 0, "some boundary matches " .. pattern)
  end
end

local function none(b)
  for name, st in pairs(b) do T.assert_eq(st.magnitudes, 0, name .. " under the paper's window") end
end

s:test("GPT: products, attention, norms, softmaxes, the loss gradient and parameter gradients", function()
  local data = vt.data.text{path = vt.corpus, context = 16}
  local model = function() return vt.models.gpt2{layers = 2, d_model = 32, heads = 2, vocab = 256, context = 16} end
  local b = one_step(model(), data, 2 ^ -44)
  check(b, {"^h%.0%.attn%.c_attn:fwd$", "^h%.0%.attn%.c_attn%.dx:bwd$", "^h%.0%.attn%.scores:fwd$",
            "^h%.0%.attn%.scores%.da:bwd$", "^h%.0%.attn%.scores%.db:bwd$", "^h%.0%.attn%.mix:fwd$",
            "^h%.0%.attn%.mix%.da:bwd$", "^h%.0%.attn%.softmax:fwd$", "^h%.0%.attn%.softmax%.sum:[fb]wd$",
            "^h%.0%.ln_1:fwd$", "^h%.0%.ln_1%.mean:fwd$", "^h%.0%.ln_1%.var:fwd$", "^h%.0%.ln_1%.stats:bwd$",
            "^h%.0%.mlp%.gelu:fwd$", "^h%.0%.mlp%.c_fc:bwd$", "^lm_head:fwd$", "^lm_head:bwd$", "^log_softmax:fwd$",
            "^log_softmax%.sum:[fb]wd$", ":grad$"})
  none(one_step(model(), data, 0))
end)

s:test("ResNet: convolutions, batch norm, pooling, the linear head and parameter gradients", function()
  local data = vt.game.data{kind = "synthetic", size = 64, input_shape = {1, 8, 8}, classes = 4, seed = 3}
  local model = function() return vt.models.resnet{depth = 18, width = 4, in_channels = 1, classes = 4} end
  local b = one_step(model(), data, 2 ^ -44)
  check(b, {"^conv1:fwd$", "^layer1%.0%.conv1:fwd$", "^layer1%.0%.conv2%.dx:bwd$", "^layer2%.0%.downsample%.0:fwd$",
            "^layer1%.0%.conv1:bwd$", "^bn1:fwd$", "^bn1%.mean:fwd$", "^bn1%.stats:bwd$", "^avgpool:fwd$",
            "^fc:fwd$", "^fc%.dx:bwd$", ":grad$"})
  none(one_step(model(), data, 0))
end)

local _, failed = T.run({exit = false, cleanup = function() vt.fs.remove(tmp) end})
os.exit(failed == 0 and 0 or 1)
