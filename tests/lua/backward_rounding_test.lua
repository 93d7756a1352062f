-- Where backward rounds: every order-dependent value (an op's input gradient, a norm's or a
-- softmax's statistics) is rounded where it is produced, so everything computed from it
-- (residual and shortcut sums, ReLU masks, GELU's derivative, batch norm's running
-- statistics) is the same on every profile once the auditor copies the trainer's log. The
-- auditor's FP64 input at each boundary is compared with the trainer's (`compare`): inputs of
-- boundaries fed only by rounded values must agree bit for bit, while the order-dependent
-- ones must differ (the control: the two profiles really sum differently).
local T = require "vt.test"

local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p '" .. tmp .. "'")

local s = T.suite("backward rounding")

-- Boundaries whose input is computed by a profile-ordered sum: products (linear layers,
-- convolutions, attention's two products, the LM head), sums (pooling, the loss), the
-- statistics of norms and softmaxes, input gradients of products, parameter gradients.
-- Everything else (norm, softmax, GELU outputs; gradients at layer outputs; running
-- statistics; the optimizer's outputs) is elementwise in rounded values and data movement.
local PRODUCTS = {"conv%d", "downsample%.0", "fc%d*", "c_attn", "c_proj", "scores", "mix", "lm_head", "avgpool", "^loss"}
local function order_dependent(name)
  if name:match("%.d[xab]:bwd$") or name:match("%.stats:bwd$") or name:match("%.sum:[bf]wd$") or
     name:match("%.mean:fwd$") or name:match("%.var:fwd$") or name:match(":grad$") then
    return true
  end
  if not name:match(":fwd$") then return false end
  for _, p in ipairs(PRODUCTS) do
    if name:match(p) then return true end
  end
  return false
end

-- One replayed step on `profile` against a trainer on native; returns the auditor's
-- divergence per boundary.
local function divergence(model, data, profile, dir)
  local spec = vt.spec{model = model, data = data, optim = vt.optim.sgd{lr = 0.05, momentum = 0.9}, batch = 8,
                       steps = 2, seed = 1, checkpoint_every = 1, round = {bits = 32, band = 0.25}}
  local store = vt.store.open(tmp .. "/" .. dir)
  local trainer = vt.trainer{spec = spec, data = data, profile = "native", capture = true, store = store}
  local auditor = vt.auditor{spec = spec, data = data, logs = "given", profile = profile}
  local rt = trainer:step()
  local ra = auditor:step(store:run("run"):step(1), {compare = rt.captured})
  T.assert_eq(ra.illegitimate, 0)
  return ra.divergence_stats
end

local function check(stats, must_exist)
  local deterministic, differing = {}, {}
  for name, d in pairs(stats) do
    if order_dependent(name) then
      if d.differ > 0 then differing[#differing + 1] = name end
    else
      deterministic[#deterministic + 1] = name
      T.assert_eq(d.differ, 0, name .. ": fed only by rounded values, yet its input differs between profiles")
    end
  end
  for _, name in ipairs(must_exist) do T.assert_true(stats[name] ~= nil, "boundary " .. name .. " exists") end
  T.assert_true(#deterministic >= 10, "deterministic boundaries checked: " .. #deterministic)
  T.assert_true(#differing >= 5, "order-dependent boundaries that differ: " .. table.concat(differing, ", "))
  return differing
end

s:test("ResNet: shortcut sums, ReLU masks and running statistics see only rounded values", function()
  local data = vt.game.data{kind = "synthetic", size = 64, input_shape = {1, 8, 8}, classes = 4, seed = 3}
  local stats = divergence(vt.models.resnet{depth = 18, width = 4, in_channels = 1, classes = 4}, data, "splitk4", "resnet")
  local differing = check(stats, {"layer1.0.conv1.dx:bwd", "layer2.0.downsample.0.dx:bwd", "bn1.mean:fwd",
                                  "bn1.var:fwd", "layer1.0.bn2.stats:bwd", "layer1.0.bn2:bwd",
                                  "layer1.0.bn1.running_mean:update", "layer1.0.bn1.running_var:update"})
  local dx = 0
  for _, name in ipairs(differing) do if name:match("conv%d%.dx:bwd$") then dx = dx + 1 end end
  T.assert_true(dx > 0, "some convolution input gradients differ before rounding")
end)

s:test("GPT: residual stream, GELU's derivative and the embedding see only rounded values", function()
  local data = vt.data.text{path = vt.corpus, context = 16}
  local stats = divergence(vt.models.gpt2{layers = 2, d_model = 32, heads = 2, vocab = 256, context = 16}, data, "blocked",
                           "gpt")
  check(stats, {"h.0.attn.c_attn.dx:bwd", "h.0.ln_1.mean:fwd", "h.0.ln_1.stats:bwd", "h.0.attn.scores.da:bwd",
                "h.0.attn.scores.db:bwd", "h.0.attn.mix.da:bwd", "h.0.attn.softmax.sum:fwd",
                "h.0.attn.softmax.sum:bwd", "h.0.mlp.c_fc:bwd", "lm_head.dx:bwd", "log_softmax.sum:fwd"})
  for _, name in ipairs{"h.0.ln_1:fwd", "h.0.attn.softmax:fwd", "h.0.mlp.gelu:fwd", "ln_f:fwd"} do
    T.assert_false(order_dependent(name), name .. " is checked as elementwise in rounded values")
  end
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf '" .. tmp .. "'")
os.exit(failed == 0 and 0 or 1)
