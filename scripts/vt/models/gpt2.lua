-- GPT-2 written with vt.nn: the same parameter names, boundaries and initial values as the
-- built-in vt.models.gpt2, so runs of either have the same states and logs bit for bit.
--
--   vt.nn.model{file = vt.nn.models_dir .. "gpt2.lua", args = {layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64}}
--
-- args: layers (12), d_model (768), heads (12), vocab (50257), context (1024), dropout (0):
-- the defaults are GPT-2 small.
local nn, F = vt.nn, vt.nn.F
local layers = args.layers or 12
local d = args.d_model or 768
local heads = args.heads or 12
local vocab = args.vocab or 50257
local context = args.context or 1024
local dropout = args.dropout or 0
local proj_std = 0.02 / math.sqrt(2 * layers)

local Block = nn.Module{
  kind = "Gpt2Block",
  init = function(self)
    self.ln_1 = nn.LayerNorm(d)
    self.attn = nn.CausalSelfAttention(d, heads, {dropout = dropout, proj_std = proj_std})
    self.ln_2 = nn.LayerNorm(d)
    self.mlp = nn.Sequential{
      nn.Linear(d, 4 * d, {init_std = 0.02}):named("c_fc"),
      nn.GELU():named("gelu"),
      nn.Linear(4 * d, d, {init_std = proj_std}):named("c_proj"),
      nn.Dropout(dropout):named("dropout"),
    }
  end,
  -- The residual stream: sums of rounded values, exact on every machine.
  -- F.fork and F.add keep it known as such (forward and backward), as the built-in's do, so
  -- the layer norms and the projections' output gradients get the zero window.
  forward = function(self, x)
    local into, around = F.fork(x)
    local h = F.add(around, self.attn(self.ln_1(into)))
    local into_mlp, around_mlp = F.fork(h)
    return F.add(around_mlp, self.mlp(self.ln_2(into_mlp)))
  end,
}

local Gpt2 = nn.Module{
  kind = "GPT2",
  init = function(self)
    self.wte = nn.Embedding(vocab, d, {init_std = 0.02})
    self.wpe = nn.Embedding(context, d, {init_std = 0.01})
    self.embd_dropout = nn.Dropout(dropout)
    local blocks = {}
    for i = 1, layers do blocks[i] = Block() end
    self.h = nn.Sequential(blocks)
    self.ln_f = nn.LayerNorm(d)
    self.lm_head = nn.TiedLinear(self.wte)
  end,
  forward = function(self, tokens)
    local positions = vt.tensor.arange(tokens:size(2))
    local x = self.embd_dropout(F.add(self.wte(tokens), self.wpe(positions)))
    return self.lm_head(self.ln_f(self.h(x)))
  end,
}

return Gpt2()
