-- ResNet with the CIFAR stem (one 3x3 convolution, no max pooling), written with vt.nn: the
-- same parameter names, boundaries and initial values as the built-in vt.models.resnet, so a
-- run of either has the same states and logs bit for bit (tests/lua/nn_test.lua).
--
--   vt.nn.model{file = vt.nn.models_dir .. "resnet.lua", args = {depth = 18, width = 16, in_channels = 1}}
--
-- args: depth (18: basic blocks, 50: bottlenecks; default 18), width (channels of the first
-- stage, default 64), in_channels (default 3), classes (default 10).
local nn, F = vt.nn, vt.nn.F
local depth = args.depth or 18
local width = args.width or 64
local in_channels = args.in_channels or 3
local classes = args.classes or 10
assert(depth == 18 or depth == 50, "resnet.lua: depth must be 18 or 50")

local function conv(cin, cout, kernel, stride)
  return nn.Conv2d(cin, cout, kernel, {stride = stride, padding = kernel == 3 and 1 or 0, bias = false})
end

local function downsample(cin, cout, stride)
  if stride == 1 and cin == cout then return nil end
  return nn.Sequential{conv(cin, cout, 1, stride), nn.BatchNorm2d(cout)}
end

-- Two 3x3 conv-bn pairs and a shortcut; fork and add keep the shortcut's gradient sums exact.
local BasicBlock = nn.Module{
  kind = "BasicBlock",
  init = function(self, cin, planes, stride)
    self.conv1 = conv(cin, planes, 3, stride)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = conv(planes, planes, 3, 1)
    self.bn2 = nn.BatchNorm2d(planes)
    self.downsample = downsample(cin, planes, stride)
  end,
  forward = function(self, x)
    local into, around = F.fork(x)
    local out = F.relu(self.bn1(self.conv1(into)))
    out = self.bn2(self.conv2(out))
    return F.relu(F.add(out, self.downsample and self.downsample(around) or around))
  end,
}

local Bottleneck = nn.Module{
  kind = "Bottleneck",
  init = function(self, cin, planes, stride)
    self.conv1 = conv(cin, planes, 1, 1)
    self.bn1 = nn.BatchNorm2d(planes)
    self.conv2 = conv(planes, planes, 3, stride)
    self.bn2 = nn.BatchNorm2d(planes)
    self.conv3 = conv(planes, planes * 4, 1, 1)
    self.bn3 = nn.BatchNorm2d(planes * 4)
    self.downsample = downsample(cin, planes * 4, stride)
  end,
  forward = function(self, x)
    local into, around = F.fork(x)
    local out = F.relu(self.bn1(self.conv1(into)))
    out = F.relu(self.bn2(self.conv2(out)))
    out = self.bn3(self.conv3(out))
    return F.relu(F.add(out, self.downsample and self.downsample(around) or around))
  end,
}

local ResNet = nn.Module{
  kind = "ResNet",
  init = function(self)
    self.conv1 = conv(in_channels, width, 3, 1)
    self.bn1 = nn.BatchNorm2d(width)
    local blocks = depth == 18 and {2, 2, 2, 2} or {3, 4, 6, 3}
    local Block = depth == 18 and BasicBlock or Bottleneck
    local expansion = depth == 18 and 1 or 4
    local cin = width
    for stage = 1, 4 do
      local planes = math.ldexp(width, stage - 1)
      local layer = {}
      for b = 1, blocks[stage] do
        layer[b] = Block(cin, planes, (stage > 1 and b == 1) and 2 or 1)
        cin = planes * expansion
      end
      self["layer" .. stage] = nn.Sequential(layer)
    end
    self.avgpool = nn.GlobalAvgPool()
    self.fc = nn.Linear(cin, classes)
  end,
  forward = function(self, x)
    x = F.relu(self.bn1(self.conv1(x)))
    x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
    return self.fc(self.avgpool(x))
  end,
}

return ResNet()
