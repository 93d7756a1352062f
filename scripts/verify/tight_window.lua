-- An honest pair under a narrow window: GPT 4x256 trained on one in-process profile and
-- audited on another, every boundary kind under `band` (default 1/16, the scenarios' tight
-- window) plus an absolute term `alpha` against each value's magnitude (ROUNDING.md
-- "Magnitudes"). With alpha = 0 (band only) a product that cancels far below its terms
-- diverges by many of its own spacings and honest entries are flagged illegitimate (the
-- threat model's cancellation gap); with a small alpha they are not.
--
--   vtrun scripts/verify/tight_window.lua [steps=100] [band=0.0625] [alpha=2^-44]
--                                         [trainer=native] [auditor=splitk4]
--
-- Prints the trainer's and the auditor's counts; exits 1 if the roots differ or any entry
-- is illegitimate.
local a = vt.args({steps = 100, band = 1 / 16, alpha = 2 ^ -44, trainer = "native", auditor = "splitk4"}, arg)
local w = {band = a.band, alpha = a.alpha}
local round = {bits = 32, fwd = w, bwd = w, grad = w, update = w}
local data = vt.data.text{path = vt.corpus, context = 64}
local function spec()
  local m = vt.models.gpt2{layers = 4, d_model = 256, heads = 4, vocab = 256, context = 64}
  return vt.spec{model = m, data = data, optim = vt.optim.adamw{lr = 3e-4, weight_decay = 0.01}, batch = 8,
                 steps = a.steps, seed = 1, checkpoint_every = 10, round = round}
end
local tdir, adir = vt.fs.tmpdir("tight-trainer"), vt.fs.tmpdir("tight-auditor")
print(string.format("GPT 4x256, %d steps, band %g, alpha %g; trainer %s, auditor %s", a.steps, a.band, a.alpha,
                    a.trainer, a.auditor))
local t = vt.trainer{spec = spec(), data = data, store = vt.store.open(tdir), profile = a.trainer}
local r = t:run{progress = false}
print(string.format("trainer  root %s  logged %.2f%% of values  steerable %.2f%%", r.root:sub(1, 16),
                    100 * r.logged / r.elements, 100 * r.steerable / r.elements))
local auditor = vt.auditor{spec = spec(), data = data, logs = vt.store.open(tdir, {read_only = true}),
                           store = vt.store.open(adir), profile = a.auditor}
local q = auditor:run{progress = false}
print(string.format("auditor  root %s  %s  corrections %d  illegitimate %d  steerable %.2f%%", q.root:sub(1, 16),
                    q.root == r.root and "equal" or "DIFFERENT", q.corrections, q.illegitimate,
                    100 * q.steerable / q.elements))
os.execute("rm -rf '" .. tdir .. "' '" .. adir .. "'")
if q.root ~= r.root or q.illegitimate > 0 then os.exit(1) end
