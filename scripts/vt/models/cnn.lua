-- A small CNN for 28x28 images (Fashion-MNIST), written with vt.nn: the example of
-- scripts/examples/lua_model.lua. Two conv-bn-relu-pool stages and a classifier.
--
-- args: width (channels of the first stage, default 8), classes (default 10), in_channels
-- (default 1), dropout (default 0).
local nn = vt.nn
local w = args.width or 8
local classes = args.classes or 10

local function stage(cin, cout)
  return nn.Sequential{
    nn.Conv2d(cin, cout, 3, {padding = 1, bias = false}):named("conv"),
    nn.BatchNorm2d(cout):named("bn"),
    nn.ReLU(),
    nn.MaxPool2d(2),
  }
end

return nn.Sequential{
  stage(args.in_channels or 1, w):named("stage1"),   -- [N, w, 14, 14]
  stage(w, 2 * w):named("stage2"),                   -- [N, 2w, 7, 7]
  nn.Flatten(),
  nn.Linear(2 * w * 7 * 7, 64):named("hidden"),
  nn.Tanh():named("act"),
  nn.Dropout(args.dropout or 0):named("dropout"),
  nn.Linear(64, classes):named("classifier"),
}
