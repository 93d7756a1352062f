-- vt.nn: rounded layers as Lua objects that compose, and models defined by a Lua source.
--
--   local nn = vt.nn
--   local net = nn.Sequential{
--     nn.Conv2d(1, 16, 3, {padding = 1}), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
--     nn.Flatten(), nn.Linear(16 * 14 * 14, 10),
--   }
--   print(net)   -- the tree, with every parameter's shape
--
-- A model that a run trains is a Lua source (a file) returning a module; vt.nn.model{file =,
-- args =} describes it and vt.spec{model = ...} commits to it: the spec holds the source
-- itself, the arguments, every module's description and every parameter's shape, so the
-- trainer, the auditor, a judge and every worker process rebuild the same model from the
-- spec alone (docs/api/nn.md). The source runs in a sandbox: the vt.nn and vt.tensor
-- constructors, `args`, and Lua's pure libraries (no files, clocks or random numbers).
--
-- Layers are the engine's own (runtime/nn/layers.h): every order-dependent operation is a
-- rounding boundary named after the module's path ("features.0:fwd", "features.0:bwd"), and
-- initial values are keyed by the run's seed and each parameter's full name, so a model
-- written here equals the built-in one with the same names bit for bit.
local core = require "vt.core"

local nn = {}
local F = {}
nn.F = F
-- The models shipped with vtrun as vt.nn sources (mlp.lua, resnet.lua, cnn.lua).
nn.models_dir = (debug.getinfo(1, "S").source:match("^@(.*/)") or "./") .. "models/"

-- ---------------------------------------------------------------------------------------
-- Modules

local Base = {}  -- methods every module has
local classes = {}

local function is_module(v)
  return type(v) == "table" and rawget(v, "_kind") ~= nil
end
nn.is_module = is_module

local function num(v)
  if v == math.floor(v) and math.abs(v) < 2 ^ 53 then return string.format("%d", v) end
  return string.format("%.17g", v)
end

local function check_int(api, what, v, min)
  if type(v) ~= "number" or v ~= math.floor(v) or v < min or v > 2 ^ 31 then
    error(string.format("%s: %s must be an integer >= %d, got %s", api, what, min, tostring(v)), 3)
  end
  return v
end

local function check_options(api, opts, valid)
  if opts == nil then return {} end
  if type(opts) ~= "table" then error(api .. ": options must be a table", 3) end
  for k in pairs(opts) do
    if not valid[k] then
      local names = {}
      for name in pairs(valid) do names[#names + 1] = name end
      table.sort(names)
      error(string.format("%s: unknown option '%s' (valid: %s)", api, tostring(k),
                          table.concat(names, ", ")), 3)
    end
  end
  return opts
end

-- A class: `kind`, and methods forward(self, x), describe(self) (the canonical text a spec
-- records), state(self) (the parameters' and buffers' local names and shapes, for printing),
-- make(self) (creates the engine's layer at self._path).
local function class(kind, methods)
  local cls = setmetatable(methods or {}, {__index = Base})
  cls.kind = kind
  cls._mt = {
    __index = cls,
    __newindex = function(self, key, value)
      if is_module(value) then self:add(key, value) else rawset(self, key, value) end
    end,
    __call = function(self, ...) return self:forward(...) end,
    __tostring = function(self) return self:tree() end,
  }
  classes[kind] = cls
  return cls
end

local function new(cls, fields)
  local self = {_kind = cls.kind, _children = {}, _config = {}}
  for k, v in pairs(fields or {}) do self[k] = v end
  return setmetatable(self, cls._mt)
end

-- Adds `child` under `name` (a child's name has no dots: paths join names with dots).
function Base:add(name, child)
  name = tostring(name)
  if not name:match("^[%w_]+$") then
    error("vt.nn: a child's name is letters, digits and '_', got '" .. name .. "'", 2)
  end
  if not is_module(child) then error("vt.nn: child '" .. name .. "' is not a vt.nn module", 2) end
  if rawget(self, name) == nil and self[name] ~= nil then
    error("vt.nn: a child cannot be named '" .. name .. "': that is a method of " .. self.kind, 2)
  end
  for _, c in ipairs(self._children) do
    if c[1] == name then error("vt.nn: two children named '" .. name .. "'", 2) end
  end
  self._children[#self._children + 1] = {name, child}
  rawset(self, name, child)
  return self
end

function Base:children()
  local i = 0
  return function()
    i = i + 1
    local c = self._children[i]
    if c then return c[1], c[2] end
  end
end

-- The name this module takes in a Sequential (instead of its position).
function Base:named(name)
  rawset(self, "_name", tostring(name))
  return self
end

function Base:describe() return self.kind end
function Base:state() return {} end
function Base:forward() error("vt.nn: " .. self.kind .. " has no forward", 2) end

-- The module's boundary name: its path, or "model" for the root.
function Base:boundary(suffix)
  local base = (self._path == nil or self._path == "") and "model" or self._path
  return suffix and (base .. "." .. suffix) or base
end

-- Number of parameter values (buffers not counted), from the shapes.
function Base:parameter_count()
  local n = 0
  self:walk(function(m)
    for _, s in ipairs(m:state()) do
      if not s.buffer then
        local k = 1
        for _, d in ipairs(s.shape) do k = k * d end
        n = n + k
      end
    end
  end)
  return n
end

-- Calls fn(module, path) for this module and every descendant, depth first, in order.
function Base:walk(fn, path)
  path = path or ""
  fn(self, path)
  for name, child in self:children() do
    child:walk(fn, path == "" and name or (path .. "." .. name))
  end
end

local function shape_text(shape)
  local parts = {}
  for i, d in ipairs(shape) do parts[i] = num(d) end
  return "[" .. table.concat(parts, ", ") .. "]"
end

function Base:tree(indent)
  indent = indent or ""
  local line = self:describe()
  local state = {}
  for _, s in ipairs(self:state()) do
    state[#state + 1] = (s.buffer and "buffer " or "") .. s.name .. " " .. shape_text(s.shape)
  end
  if #state > 0 then line = line .. "  " .. table.concat(state, ", ") end
  if #self._children == 0 then return line end
  local out = {line .. " {"}
  for name, child in self:children() do
    out[#out + 1] = indent .. "  (" .. name .. "): " .. child:tree(indent .. "  ")
  end
  out[#out + 1] = indent .. "}"
  return table.concat(out, "\n")
end

-- ---------------------------------------------------------------------------------------
-- Layers with parameters (the engine's)

local Linear = class("Linear")
-- Linear(in, out [, {bias = true, init_std = 0}]): PyTorch's uniform initialisation, or
-- N(0, init_std) weights and zero bias when init_std > 0.
function nn.Linear(inputs, outputs, opts)
  opts = check_options("vt.nn.Linear", opts, {bias = true, init_std = true})
  return new(Linear, {_config = {
    inputs = check_int("vt.nn.Linear", "in", inputs, 1),
    outputs = check_int("vt.nn.Linear", "out", outputs, 1),
    bias = opts.bias ~= false,
    init_std = opts.init_std or 0,
  }})
end
function Linear:describe()
  local c = self._config
  return string.format("Linear(in=%s,out=%s,bias=%s%s)", num(c.inputs), num(c.outputs),
                       tostring(c.bias), c.init_std > 0 and (",init_std=" .. num(c.init_std)) or "")
end
function Linear:state()
  local c = self._config
  local s = {{name = "weight", shape = {c.outputs, c.inputs}}}
  if c.bias then s[2] = {name = "bias", shape = {c.outputs}} end
  return s
end
function Linear:make()
  local c = self._config
  return core.nn_make("Linear", self._path, c.inputs, c.outputs, c.bias, c.init_std)
end

local Conv2d = class("Conv2d")
-- Conv2d(in, out, kernel [, {stride = 1, padding = 0, bias = true}]): square kernels.
function nn.Conv2d(inputs, outputs, kernel, opts)
  local api = "vt.nn.Conv2d"
  opts = check_options(api, opts, {stride = true, padding = true, bias = true})
  return new(Conv2d, {_config = {
    inputs = check_int(api, "in", inputs, 1),
    outputs = check_int(api, "out", outputs, 1),
    kernel = check_int(api, "kernel", kernel, 1),
    stride = check_int(api, "stride", opts.stride or 1, 1),
    padding = check_int(api, "padding", opts.padding or 0, 0),
    bias = opts.bias ~= false,
  }})
end
function Conv2d:describe()
  local c = self._config
  return string.format("Conv2d(in=%s,out=%s,kernel=%s,stride=%s,padding=%s,bias=%s)",
                       num(c.inputs), num(c.outputs), num(c.kernel), num(c.stride),
                       num(c.padding), tostring(c.bias))
end
function Conv2d:state()
  local c = self._config
  local s = {{name = "weight", shape = {c.outputs, c.inputs, c.kernel, c.kernel}}}
  if c.bias then s[2] = {name = "bias", shape = {c.outputs}} end
  return s
end
function Conv2d:make()
  local c = self._config
  return core.nn_make("Conv2d", self._path, c.inputs, c.outputs, c.kernel, c.stride, c.padding,
                      c.bias)
end

local BatchNorm2d = class("BatchNorm2d")
-- Batch statistics in training (the profile's reductions), running statistics in evaluation;
-- momentum 0.1, eps 1e-5.
function nn.BatchNorm2d(channels)
  return new(BatchNorm2d,
             {_config = {channels = check_int("vt.nn.BatchNorm2d", "channels", channels, 1)}})
end
function BatchNorm2d:describe() return "BatchNorm2d(" .. num(self._config.channels) .. ")" end
function BatchNorm2d:state()
  local c = self._config.channels
  return {{name = "weight", shape = {c}}, {name = "bias", shape = {c}},
          {name = "running_mean", shape = {c}, buffer = true},
          {name = "running_var", shape = {c}, buffer = true}}
end
function BatchNorm2d:make() return core.nn_make("BatchNorm2d", self._path, self._config.channels) end

local LayerNorm = class("LayerNorm")
function nn.LayerNorm(dim)
  return new(LayerNorm, {_config = {dim = check_int("vt.nn.LayerNorm", "dim", dim, 1)}})
end
function LayerNorm:describe() return "LayerNorm(" .. num(self._config.dim) .. ")" end
function LayerNorm:state()
  local d = self._config.dim
  return {{name = "weight", shape = {d}}, {name = "bias", shape = {d}}}
end
function LayerNorm:make() return core.nn_make("LayerNorm", self._path, self._config.dim) end

local Embedding = class("Embedding")
-- Embedding(count, dim [, {init_std = 1}]): rows of N(0, init_std) values.
function nn.Embedding(count, dim, opts)
  local api = "vt.nn.Embedding"
  opts = check_options(api, opts, {init_std = true})
  local std = opts.init_std or 1
  if type(std) ~= "number" or not (std > 0) then error(api .. ": init_std must be > 0", 2) end
  return new(Embedding, {_config = {count = check_int(api, "count", count, 1),
                                    dim = check_int(api, "dim", dim, 1), init_std = std}})
end
function Embedding:describe()
  local c = self._config
  return string.format("Embedding(count=%s,dim=%s,init_std=%s)", num(c.count), num(c.dim),
                       num(c.init_std))
end
function Embedding:state()
  return {{name = "weight", shape = {self._config.count, self._config.dim}}}
end
function Embedding:make()
  local c = self._config
  return core.nn_make("Embedding", self._path, c.count, c.dim, c.init_std)
end

local Attention = class("CausalSelfAttention")
-- GPT-2's causal self-attention (c_attn, c_proj), inputs [N, T, dim].
function nn.CausalSelfAttention(dim, heads, opts)
  local api = "vt.nn.CausalSelfAttention"
  opts = check_options(api, opts, {dropout = true, proj_std = true})
  dim = check_int(api, "dim", dim, 1)
  heads = check_int(api, "heads", heads, 1)
  if dim % heads ~= 0 then
    error(string.format("%s: dim %d is not divisible by %d heads", api, dim, heads), 2)
  end
  return new(Attention, {_config = {dim = dim, heads = heads, dropout = opts.dropout or 0,
                                    proj_std = opts.proj_std or 0.02}})
end
function Attention:describe()
  local c = self._config
  return string.format("CausalSelfAttention(dim=%s,heads=%s,dropout=%s,proj_std=%s)", num(c.dim),
                       num(c.heads), num(c.dropout), num(c.proj_std))
end
function Attention:state()
  local d = self._config.dim
  return {{name = "c_attn.weight", shape = {3 * d, d}}, {name = "c_attn.bias", shape = {3 * d}},
          {name = "c_proj.weight", shape = {d, d}}, {name = "c_proj.bias", shape = {d}}}
end
function Attention:make()
  local c = self._config
  return core.nn_make("CausalSelfAttention", self._path, c.dim, c.heads, c.dropout, c.proj_std)
end

local TiedLinear = class("TiedLinear")
-- TiedLinear(embedding): x @ E^T with E the weight of an Embedding of the same model (GPT-2's
-- language-model head), no bias and no parameters of its own.
function nn.TiedLinear(embedding)
  if not is_module(embedding) or embedding.kind ~= "Embedding" then
    error("vt.nn.TiedLinear: expected an Embedding module", 2)
  end
  return new(TiedLinear, {_tied = embedding})
end
function TiedLinear:describe()
  local path = rawget(self._tied, "_path")
  if path == nil then
    error("vt.nn.TiedLinear: its Embedding is not part of the model", 0)
  end
  return "TiedLinear(weight=" .. path .. ".weight)"
end
function TiedLinear:forward(x)
  local impl = rawget(self._tied, "_impl")
  if impl == nil then
    error("vt.nn: TiedLinear's Embedding has no parameters yet (layers get them when a spec builds the model)", 2)
  end
  return core.nn_tied(x, impl, self:boundary())
end

-- Every layer with parameters runs the engine's layer made for it.
for _, cls in ipairs{Linear, Conv2d, BatchNorm2d, LayerNorm, Embedding, Attention} do
  cls.forward = function(self, x)
    local impl = rawget(self, "_impl")
    if impl == nil then
      error("vt.nn: " .. self.kind .. " has no parameters yet: layers get them when a spec " ..
            "builds the model (vt.nn.model{...} and vt.spec)", 2)
    end
    return core.nn_call(impl, x)
  end
end

-- ---------------------------------------------------------------------------------------
-- Layers without parameters

local function simple(kind, forward, describe)
  local cls = class(kind, {forward = forward, describe = describe})
  return cls
end

-- Exact operations (the same bits on every machine): no boundary of their own.
local ReLU = simple("ReLU", function(_, x) return core.nn_relu(x) end)
function nn.ReLU() return new(ReLU) end
local Identity = simple("Identity", function(_, x) return x end)
function nn.Identity() return new(Identity) end
local Flatten = simple("Flatten", function(_, x) return F.flatten(x) end)
function nn.Flatten() return new(Flatten) end

local MaxPool2d = simple("MaxPool2d", function(self, x) return core.nn_maxpool(x, self._config.kernel) end,
  function(self) return "MaxPool2d(" .. num(self._config.kernel) .. ")" end)
-- Max pooling over non-overlapping kernel x kernel windows (stride = kernel).
function nn.MaxPool2d(kernel)
  return new(MaxPool2d, {_config = {kernel = check_int("vt.nn.MaxPool2d", "kernel", kernel, 1)}})
end

-- Transcendental or order-dependent: through a boundary named after the module.
local GELU = simple("GELU", function(self, x) return core.nn_gelu(x, self:boundary()) end)
function nn.GELU() return new(GELU) end
local Tanh = simple("Tanh", function(self, x) return core.nn_tanh(x, self:boundary()) end)
function nn.Tanh() return new(Tanh) end
local Sigmoid = simple("Sigmoid", function(self, x) return core.nn_sigmoid(x, self:boundary()) end)
function nn.Sigmoid() return new(Sigmoid) end
local GlobalAvgPool = simple("GlobalAvgPool",
                             function(self, x) return core.nn_avgpool(x, self:boundary()) end)
-- The mean over the spatial dimensions: [N, C, H, W] -> [N, C].
function nn.GlobalAvgPool() return new(GlobalAvgPool) end

local Dropout = simple("Dropout",
  function(self, x) return core.nn_dropout(x, self._config.p, self:boundary()) end,
  function(self) return "Dropout(" .. num(self._config.p) .. ")" end)
-- Inverted dropout with a mask keyed by (seed, step, the module's path): the same on every machine.
function nn.Dropout(p)
  if type(p) ~= "number" or p < 0 or p >= 1 then
    error("vt.nn.Dropout: p must be a number in [0, 1), got " .. tostring(p), 2)
  end
  return new(Dropout, {_config = {p = p}})
end

-- ---------------------------------------------------------------------------------------
-- Containers

local Sequential = class("Sequential")
-- Sequential{m1, m2, ...}: children named by position from 0 (as PyTorch names them), or by
-- m:named("name").
function nn.Sequential(list)
  if type(list) ~= "table" then error("vt.nn.Sequential: expected a list of modules", 2) end
  local self = new(Sequential)
  for i, m in ipairs(list) do
    if not is_module(m) then error("vt.nn.Sequential: item " .. i .. " is not a vt.nn module", 2) end
    self:add(rawget(m, "_name") or tostring(i - 1), m)
  end
  return self
end
function Sequential:forward(x)
  for _, child in self:children() do x = child(x) end
  return x
end

local Residual = class("Residual")
-- Residual(body [, shortcut]): body(x) + shortcut(x) (x itself without a shortcut).
function nn.Residual(body, shortcut)
  if not is_module(body) then error("vt.nn.Residual: body must be a vt.nn module", 2) end
  local self = new(Residual)
  self:add("body", body)
  if shortcut ~= nil then self:add("shortcut", shortcut) end
  return self
end
function Residual:forward(x)
  local into, around = F.fork(x)
  local shortcut = rawget(self, "shortcut")
  return F.add(self.body(into), shortcut and shortcut(around) or around)
end

-- vt.nn.Module{kind = "Block", init = function(self, ...) end, forward = function(self, x) end}
-- -> a constructor. init assigns children as fields (self.conv1 = vt.nn.Conv2d(...)); they are
-- registered in the order they are assigned, under the field's name.
function nn.Module(def)
  if type(def) ~= "table" or type(def.forward) ~= "function" then
    error("vt.nn.Module: expected {kind = 'Name', init = function(self, ...), forward = " ..
          "function(self, x)}", 2)
  end
  local kind = def.kind or "Module"
  if type(kind) ~= "string" or not kind:match("^[%a_][%w_]*$") then
    error("vt.nn.Module: kind must be a name (letters, digits, '_'), got " .. tostring(kind), 2)
  end
  local cls = class(kind, {forward = def.forward})
  for k, v in pairs(def) do
    if k ~= "kind" and k ~= "init" and k ~= "forward" then cls[k] = v end
  end
  return function(...)
    local self = new(cls)
    if def.init then def.init(self, ...) end
    return self
  end
end

-- ---------------------------------------------------------------------------------------
-- Functional operations for forward functions

-- Same shapes: a + b; otherwise b is broadcast over a's leading dimensions (a bias).
function F.add(a, b) return core.nn_add(a, b) end
-- Two uses of x (a residual's branch and shortcut): their gradients are added exactly.
function F.fork(x) return core.nn_fork(x) end
function F.relu(x) return core.nn_relu(x) end
-- [N, ...] -> [N, prod(...)].
function F.flatten(x) return x:reshape{x:size(1), -1} end

-- ---------------------------------------------------------------------------------------
-- Models from sources

-- What a model's source may use: the constructors, args and pure Lua libraries (not print:
-- a worker process's stdout carries its protocol).
local function copy(t, without)
  local out = {}
  for k, v in pairs(t) do if not (without and without[k]) then out[k] = v end end
  return out
end

-- The most elements one tensor a source makes may have (2^26: 512 MiB of float64): a spec is
-- untrusted input, and its source runs wherever the spec is read.
local MAX_ELEMENTS = 2 ^ 26

-- The elements a vt.tensor constructor `name` called with these arguments makes: the product
-- of a shape (a table, or sizes as separate numbers), or arange's count.
local function elements(name, first, ...)
  -- (A dimension of 0 counts as 1: zeros{2^40, 0} holds nothing but totable() would make
  -- 2^40 tables in one C call.)
  local function count(d)
    local v = tonumber(d)
    return v and math.max(math.abs(v), 1) or 0
  end
  if type(first) == "table" then
    local n = 1
    for _, d in ipairs(first) do n = n * count(d) end
    return n
  end
  if name == "arange" then  -- arange(stop), arange(start, stop [, step])
    local second, third = ...
    if tonumber(second) == nil then return count(first) end
    local step = tonumber(third)
    return math.abs((tonumber(second) - (tonumber(first) or 0)) / ((step and step ~= 0) and step or 1))
  end
  if tonumber(first) ~= nil then  -- sizes as arguments: zeros(2, 3, 4)
    local n = count(first)
    for i = 1, select("#", ...) do
      local d = select(i, ...)
      if tonumber(d) == nil then break end
      n = n * count(d)
    end
    return n
  end
  return 0
end

-- A table's length as the entries from t[1] to the first nil (`#` gives any border of a
-- table with holes, by its layout, which differs between processes: refused_operator).
local function array_length(t)
  local n = 0
  while rawget(t, n + 1) ~= nil do n = n + 1 end
  return n
end

-- len(v) for a model source: text's length, or a table's array_length.
local function source_len(v)
  if type(v) == "string" then return #v end
  if type(v) ~= "table" then error("len: a table or text expected, got " .. type(v), 2) end
  return array_length(v)
end

-- The table functions that take a table's length (`#`): for a table without holes (entries
-- from 1 to its first nil and no positive number key beyond) that length is its only border,
-- the same in every process; other tables are refused.
local tmaxn = table.maxn
local function without_holes(api, t)
  if type(t) == "table" and tmaxn(t) ~= array_length(t) then
    error(api .. ": a model source may pass only tables without holes (number keys beyond " ..
          "the first nil, or not integers)", 3)
  end
end
local function length_safe(api, fn)
  return function(t, ...)
    without_holes(api, t)
    return fn(t, ...)
  end
end

local function limited_tensor(tensor)
  local out = {}
  for name, fn in pairs(tensor) do
    if name ~= "load" then
      out[name] = function(...)
        if elements(name, ...) > MAX_ELEMENTS then
          error("vt.tensor." .. name .. ": a model source may make tensors of at most 2^26 elements", 2)
        end
        return fn(...)
      end
    end
  end
  local call = getmetatable(tensor).__call
  return setmetatable(out, {__call = function(_, values, ...)
    -- The elements a nested table makes: the product of the lengths along its first entries
    -- (rows may be one shared table, so its own size says nothing).
    local n, t, depth = 1, values, 0
    while type(t) == "table" and depth <= 64 do
      n = n * array_length(t)
      t, depth = t[1], depth + 1
    end
    if n > MAX_ELEMENTS then
      error("vt.tensor: a model source may make tensors of at most 2^26 elements", 2)
    end
    return call(tensor, values, ...)
  end})
end

-- Lua patterns backtrack: one string.find over a long text with a few `.-` runs for ages
-- inside C, where the instruction budget cannot stop it. A source may match patterns with
-- at most two repetition items against texts of at most 256 bytes (plain finds: any text).
local MAX_PATTERN_TEXT = 256
-- The string work a source may do in one build or forward call, in bytes scanned: a C call
-- runs outside the instruction budget, and millions of cheap ones would add up to hours.
-- Reset by nn._build, nn._preview and each forward.
local MAX_STRING_WORK = 2 ^ 28
local string_work = 0
local function charge(api, bytes)
  string_work = string_work + bytes
  if string_work > MAX_STRING_WORK then
    error("string." .. api .. ": a model source may scan at most 2^28 bytes of text in one build or forward", 3)
  end
end
-- (The library's own functions, called as functions: in a model's state the string
-- metatable leads to safe_string.)
local sgsub, sfind, sformat, srep = string.gsub, string.find, string.format, string.rep
local function check_pattern(api, text, pattern)
  text, pattern = tostring(text), tostring(pattern)
  local items = select(2, sgsub((sgsub(pattern, "%%.", "")), "[%*%+%-%?]", ""))
  if #text > MAX_PATTERN_TEXT or items > 1 or #pattern > 64 then
    error("string." .. api .. ": a model source may match patterns of at most 64 bytes and one repetition " ..
          "(* + - ?) against texts of at most 256 bytes", 3)
  end
  charge(api, #text * #text)  -- one repetition: at most quadratic
end

-- string without dump; rep limited to 2^24 bytes; patterns bounded (check_pattern); format
-- without %p and with only numbers and text (an address would differ between processes).
local safe_string = copy(string, {dump = true})
safe_string.rep = function(text, n, sep)
  local count = tonumber(n)
  if count == nil then error("string.rep: the count must be a number", 2) end
  local bytes = count * (#tostring(text) + #tostring(sep or ""))
  if bytes > 2 ^ 24 then
    error("string.rep: a model source may make strings of at most 2^24 bytes", 2)
  end
  charge("rep", math.max(bytes, 0))
  return srep(text, count, sep)
end
safe_string.find = function(text, pattern, init, plain)
  if plain then
    charge("find", #tostring(text) * #tostring(pattern))
  else
    check_pattern("find", text, pattern)
  end
  return sfind(text, pattern, init, plain)
end
-- gmatch as a Lua closure over find: the library's iterator keeps its position in a C
-- closure's upvalues, which the host's check of what a model keeps cannot see (a forward that
-- called a kept iterator counted its calls unseen). Lua 5.1's gmatch: the next match at or
-- after the position, which moves past an empty match by one; `^` is no anchor there, so a
-- pattern that starts with one is refused rather than read another way.
safe_string.gmatch = function(text, pattern)
  check_pattern("gmatch", text, pattern)
  text, pattern = tostring(text), tostring(pattern)
  if pattern:byte(1) == 94 then
    error("string.gmatch: a model source may not start a gmatch pattern with ^", 2)
  end
  local pos = 1
  return function()
    if pos > #text + 1 then return nil end
    local found = {sfind(text, pattern, pos)}
    if found[1] == nil then
      pos = #text + 2
      return nil
    end
    local first, last = found[1], found[2]
    pos = last >= first and last + 1 or first + 1
    if #found > 2 then return unpack(found, 3) end
    return text:sub(first, last)
  end
end
for _, api in ipairs{"match", "gsub"} do
  local fn = string[api]
  safe_string[api] = function(text, pattern, ...)
    check_pattern(api, text, pattern)
    return fn(text, pattern, ...)
  end
end
safe_string.format = function(fmt, ...)
  if sfind((sgsub(tostring(fmt), "%%%%", "")), "%%[-+ #0]*%d*%.?%d*p") then
    error("string.format: a model source may not format addresses (%p)", 2)
  end
  for i = 1, select("#", ...) do
    local t = type((select(i, ...)))
    if t ~= "number" and t ~= "string" and t ~= "boolean" and t ~= "nil" then
      error("string.format: a model source may format numbers and text, got a " .. t, 2)
    end
  end
  return sformat(fmt, ...)
end

-- pairs in a fixed order (numbers, then strings, each sorted): the order of a table's keys
-- otherwise depends on the process (string hashes are seeded per Lua state, tables sit at
-- other addresses), and a model built in that order would differ between two parties.
local function sorted_pairs(t)
  if type(t) ~= "table" then error("pairs: a table expected, got " .. type(t), 2) end
  local keys = {}
  for k in pairs(t) do
    local kt = type(k)
    if kt ~= "number" and kt ~= "string" then
      error("pairs: a model source may iterate over tables keyed by numbers and text only, got a " .. kt, 2)
    end
    keys[#keys + 1] = k
  end
  table.sort(keys, function(x, y)
    if type(x) ~= type(y) then return type(x) == "number" end
    return x < y
  end)
  local i = 0
  return function()
    i = i + 1
    local k = keys[i]
    if k ~= nil then return k, t[k] end
  end, t, nil
end

-- tostring without addresses: what has a __tostring (a tensor, a module) prints as it does,
-- other tables, functions and userdata as their type.
local function safe_tostring(v)
  local t = type(v)
  if t == "number" or t == "string" or t == "boolean" or t == "nil" then return tostring(v) end
  local mt = debug.getmetatable(v)  -- the real one (a source's __metatable field may lie)
  if type(mt) == "table" and rawget(mt, "__tostring") then return tostring(v) end
  return t
end

-- getmetatable for the source's own tables only: a tensor's or a string's metatable holds
-- the host's methods (save writes files; refused operations), its __gc runs outside the
-- instruction budget.
local function safe_getmetatable(v)
  if type(v) ~= "table" then return nil end
  return getmetatable(v)
end

-- table for a source: without foreach (hash order), and with the functions that take `#`
-- refusing tables with holes (without_holes); getn is len.
local function safe_table()
  local t = copy(table, {foreach = true, foreachi = true})
  for _, api in ipairs{"insert", "remove", "concat", "sort"} do
    t[api] = length_safe("table." .. api, table[api])
  end
  t.getn = length_safe("table.getn", array_length)
  return t
end

local function sandbox(args)
  local vt = require "vt"
  local tensor = limited_tensor(vt.tensor)
  -- vt.nn without what reads files or builds models in this state (model, _build).
  local safe_nn = copy(nn, {model = true, _build = true, _preview = true, models_dir = true})
  return {
    vt = {nn = safe_nn, tensor = tensor}, args = args,
    -- math with the functions IEEE arithmetic defines exactly: libm's exp, log, sin ... may
    -- differ in their last bit between machines, and a width or scale computed with them
    -- would build another model (or none) on another party's machine.
    math = copy(math, {random = true, randomseed = true, exp = true, log = true, log10 = true, pow = true,
                       sin = true, cos = true, tan = true, asin = true, acos = true, atan = true,
                       atan2 = true, sinh = true, cosh = true, tanh = true}),
    -- (Copies: the host's own checks call the string methods, which a source that replaced
    -- an entry of its `string` would otherwise change; foreach visits keys in hash order.)
    string = copy(safe_string), table = safe_table(),
    len = source_len,
    assert = assert, error = error, ipairs = ipairs, pairs = sorted_pairs,
    select = select, tonumber = tonumber, tostring = safe_tostring, type = type,
    unpack = length_safe("unpack", unpack), setmetatable = setmetatable,
    getmetatable = safe_getmetatable,
    rawget = rawget, rawset = rawset, rawequal = rawequal,
  }
end

-- The first operator of `source` a model may not use, and its line, or nil:
-- - `^`: on numbers it calls the C library's pow (at parse time too, when it folds
--   constants), whose last bit may differ between machines and C libraries: a width or a
--   scale computed with it could build another model on another party's machine;
-- - `#`: on a table with holes it gives whichever border the table's layout leads to, and
--   the layout depends on when it was rehashed, which LuaJIT's per-process string-hash seed
--   and tables' addresses decide (a red-team source built tables in a forward whose lengths
--   differed between two runs of the same spec). `len(t)` counts from 1 to the first nil.
-- Either character outside strings and comments is always the operator, so the scan skips
-- exactly what Lua's lexer skips: short strings with their escapes, long strings and
-- comments ([[...]], [==[...]==]) and line comments.
local ssub, smatch = string.sub, string.match
local function refused_operator(source)
  local n, line = #source, 1
  local function lines(from, to)  -- counts the newlines in source[from..to]
    local at = sfind(source, "\n", from, true)
    while at and at <= to do
      line = line + 1
      at = sfind(source, "\n", at + 1, true)
    end
  end
  local function long_bracket(at)  -- the level of a long bracket opening at `at`, or nil
    local eq = smatch(source, "^%[(=*)%[", at)
    return eq and #eq
  end
  local function past_long(at, level)  -- just past the long string or comment opening at `at`
    local close = "]" .. srep("=", level) .. "]"
    local stop = sfind(source, close, at + level + 2, true)
    local last = stop and stop + #close - 1 or n
    lines(at, last)
    return last + 1
  end
  local i = 1
  while true do
    local at = sfind(source, "[%-%[\"'%^#\r\n]", i)
    if at == nil then return nil end
    local c = ssub(source, at, at)
    if c == "^" or c == "#" then return c, line end
    i = at + 1
    if c == "\n" or c == "\r" then
      -- (Lua ends a line at either, a pair of the two being one)
      line = line + 1
      local pair = ssub(source, i, i)
      if (pair == "\n" or pair == "\r") and pair ~= c then i = i + 1 end
    elseif c == "-" and ssub(source, at + 1, at + 1) == "-" then
      local level = long_bracket(at + 2)
      if level then
        i = past_long(at + 2, level)
      else
        i = sfind(source, "[\r\n]", at + 2) or n + 1  -- a line comment ends at either
      end
    elseif c == "[" and long_bracket(at) then
      i = past_long(at, long_bracket(at))
    elseif c == '"' or c == "'" then
      -- a short string: up to its closing quote, a backslash escaping the character after it
      while true do
        local d = sfind(source, c == '"' and '[\\"\r\n]' or "[\\'\r\n]", i)
        if d == nil then return nil end  -- unfinished: Lua refuses it
        local e = ssub(source, d, d)
        if e == "\\" then
          if ssub(source, d + 1, d + 1) == "\n" then line = line + 1 end
          i = d + 2
        elseif e == "\n" or e == "\r" then
          line, i = line + 1, d + 1  -- (Lua refuses it too)
        else
          i = d + 1
          break
        end
      end
    end
  end
end

-- Runs a model source: returns its root module (the source returns a module, or a function
-- of args that returns one).
local function run_source(source, args, chunkname)
  if type(source) ~= "string" then error("vt.nn: a model source must be a string", 3) end
  if source:byte(1) == 27 then error("vt.nn: a model source is Lua text, not bytecode", 3) end
  local op, line = refused_operator(source)
  if op == "^" then
    error("vt.nn: model.source line " .. line .. " uses ^, which calls the C library's pow: its " ..
          "last bit may differ between machines, and so would the model; multiply, or use " ..
          "math.ldexp(x, n) for x * 2^n", 3)
  elseif op == "#" then
    error("vt.nn: model.source line " .. line .. " uses #, whose result for a table with holes " ..
          "differs between processes; use len(t) (the entries from t[1] to the first nil) or " ..
          "s:len() for text", 3)
  end
  local chunk, err = loadstring(source, chunkname or "=model.source")
  if not chunk then error("vt.nn: model.source does not compile: " .. err, 3) end
  local env = sandbox(args)
  setfenv(chunk, env)
  local root = chunk(args)
  if type(root) == "function" then root = root(args) end
  if not is_module(root) then
    error("vt.nn: model.source must return a vt.nn module (or a function of args returning " ..
          "one), got " .. type(root), 3)
  end
  return root, env
end

-- Paths: every module records its path; a module placed twice in the tree is refused.
local function bind(root)
  local seen = {}
  root:walk(function(m, path)
    if seen[m] then
      error("vt.nn: one module is placed twice in the model (at '" .. seen[m] .. "' and '" ..
            path .. "'); make a new one for each place", 0)
    end
    seen[m] = path
    rawset(m, "_path", path)
  end)
end

-- Called by the host (bindings/nn.cc) in a model's own Lua state: builds the source's module
-- tree, makes the engine's layers in tree order, and returns what the spec records.
-- Locks a model's own Lua state before a source runs in it (nn._build, nn._preview): string
-- methods ("x"):rep(n) get the sandbox's limits too, and the host's metatables are hidden.
-- Methods that would compute order-dependent or transcendental values outside a boundary
-- (and so differ between machines), and the one that writes files, are refused in the method
-- table itself (a source cannot reach it around __index), while building and in every
-- forward.
-- {path = description} of a bound tree, each checked to be text (the host reads them).
local function descriptions(root)
  local modules = {}
  root:walk(function(m, path)
    local d = m:describe()
    if type(path) ~= "string" or type(d) ~= "string" then
      error("vt.nn: a module's path and describe() must be text (at " .. tostring(path) .. ")", 0)
    end
    modules[path] = d
  end)
  return modules
end

-- The tensor values a source's tensor methods may touch in one build or forward call (each
-- call charges the elements of its tensor arguments): a method on a large tensor is one Lua
-- instruction, so the instruction budget alone let `x:fill(i)` on 2^24 values run for hours
-- (7 ms a call). Reset by nn._build, nn._preview and each forward.
local MAX_TENSOR_WORK = 2 ^ 34
local tensor_work = 0
local locked = false

local function lock_model_state()
  local smeta = getmetatable("")
  smeta.__index = safe_string
  smeta.__metatable = false
  local registry = debug.getregistry()
  local meta = registry["vt.Tensor"]
  local refused = {
    matmul = "vt.nn.Linear", sum = "vt.nn.GlobalAvgPool or a layer", mean = "vt.nn.GlobalAvgPool",
    norm = "vt.nn.LayerNorm", exp = "a vt.nn layer", log = "a vt.nn layer", tanh = "vt.nn.Tanh",
    sigmoid = "vt.nn.Sigmoid", pow = "a product x:mul(x)",
  }
  local methods = meta.methods
  for key, use in pairs(refused) do
    methods[key] = function()
      error("vt.nn: tensor:" .. key .. " gives different bits on different machines and has " ..
            "no rounding boundary; in a model's forward use " .. use, 2)
    end
  end
  methods.save = function() error("vt.nn: a model source cannot write files (tensor:save)", 2) end
  meta.__pow = function() error("vt.nn: x ^ y has no rounding boundary; use x:mul(x)", 2) end
  if not locked then
    locked = true
    local numel, getmeta = methods.numel, debug.getmetatable
    local size, dim = methods.size, methods.dim  -- (before they are charged below)
    local function charged(api, fn)
      return function(...)
        local n = 0
        for i = 1, select("#", ...) do
          local v = select(i, ...)
          if getmeta(v) == meta then n = n + numel(v) end
        end
        tensor_work = tensor_work + n
        if tensor_work > MAX_TENSOR_WORK then
          error("tensor:" .. api .. ": a model source may touch at most 2^34 tensor values in " ..
                "one build or forward", 2)
        end
        return fn(...)
      end
    end
    for key, fn in pairs(methods) do
      if type(fn) == "function" and key ~= "numel" then methods[key] = charged(key, fn) end
    end
    for _, key in ipairs{"__add", "__sub", "__mul", "__div", "__mod", "__unm", "__eq", "__lt", "__le",
                         "__concat"} do
      if type(meta[key]) == "function" then meta[key] = charged(key, meta[key]) end
    end
    -- t[i] = v writes one slice along the first dimension (t[{...}] = v a block): charged by
    -- what it writes at most, not the whole tensor (filling a table element by element is
    -- honest work).
    local newindex = meta.__newindex
    meta.__newindex = function(t, key, value)
      local n = numel(t)
      if type(key) == "number" and n > 0 and dim(t) > 0 then n = n / size(t, 1) end
      if getmeta(value) == meta then n = n + numel(value) end
      tensor_work = tensor_work + n
      if tensor_work > MAX_TENSOR_WORK then
        error("tensor:__newindex: a model source may touch at most 2^34 tensor values in " ..
              "one build or forward", 2)
      end
      return newindex(t, key, value)
    end
  end
  meta.__metatable = false
  if registry["vt.nn.Layer"] then registry["vt.nn.Layer"].__metatable = false end
end

-- Called by the host (bindings/nn.cc) in a model's own Lua state: builds the source's module
-- tree, makes the engine's layers in tree order, and returns what the spec records.
function nn._build(source, args)
  lock_model_state()
  string_work, tensor_work = 0, 0
  local root, env = run_source(source, args)
  bind(root)
  local modules = descriptions(root)
  root:walk(function(m)
    if m.make then rawset(m, "_impl", m:make()) end
  end)
  -- (string_work is 0 between calls: the host checks that a forward changed nothing the
  -- model keeps, this counter included.)
  -- A failed forward resets it too: its error is passed on with its traceback.
  local function forward(m, x)
    string_work, tensor_work = 0, 0
    local ok, y = xpcall(function() return m(x) end, debug.traceback)
    string_work, tensor_work = 0, 0
    if not ok then error(y, 0) end
    return y
  end
  string_work, tensor_work = 0, 0
  return {root = root, forward = forward, modules = modules, env = env}
end

-- Called by the host (bindings/nn.cc, core.nn_preview) in a Lua state of its own, locked as
-- a spec's model state: what vt.nn.model shows of a source, without running it in the
-- caller's state.
function nn._preview(source, args, chunkname)
  lock_model_state()
  string_work, tensor_work = 0, 0
  local root = run_source(source, args, chunkname)
  bind(root)
  descriptions(root)
  return {text = tostring(root), parameters = root:parameter_count()}
end

-- vt.nn.model{file = "cnn.lua" | source = "...", args = {width = 16}} -> a model for vt.spec.
-- The source is run now too, so that the result prints (print(model.module),
-- model.module:parameter_count()) and a source that does not build fails now, with its
-- message: in a Lua state of its own (core.nn_preview), sandboxed, locked and under the
-- instruction budget as every spec build is, never in the caller's.
function nn.model(opts)
  local api = "vt.nn.model"
  opts = check_options(api, opts, {file = true, source = true, args = true})
  local source = opts.source
  local chunkname = "=model.source"
  if opts.file then
    if source then error(api .. ": give file or source, not both", 2) end
    local f, err = io.open(opts.file, "rb")
    if not f then error(api .. ": cannot read model file: " .. tostring(err), 2) end
    source = f:read("*a")
    f:close()
    chunkname = "@" .. opts.file
  end
  if type(source) ~= "string" then error(api .. ": option 'file' or 'source' is required", 2) end
  local args = opts.args or {}
  if type(args) ~= "table" then error(api .. ": args must be a table", 2) end
  for k, v in pairs(args) do
    if type(k) ~= "string" or not k:match("^[%a_][%w_]*$") then
      error(api .. ": args keys must be names, got " .. tostring(k), 2)
    end
    local t = type(v)
    if t ~= "number" and t ~= "string" and t ~= "boolean" then
      error(api .. ": args." .. k .. " must be a number, string or boolean, got " .. t, 2)
    end
    if t == "number" and (v ~= v or v == math.huge or v == -math.huge) then
      error(api .. ": args." .. k .. " must be finite", 2)
    end
  end
  local text, parameters = core.nn_preview(source, copy(args), chunkname)
  local module = setmetatable({}, {__tostring = function() return text end,
                                   __index = {parameter_count = function() return parameters end}})
  return setmetatable({type = "lua", source = source, args = args, module = module},
                      {__tostring = function(m) return "vt.nn.model " .. tostring(m.module) end})
end

return nn
