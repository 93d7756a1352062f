-- The MLP written with vt.nn: the same parameter names, boundaries and initial values as the
-- built-in vt.models.mlp (without dropout), so runs of either are equal bit for bit.
--
--   vt.nn.model{file = vt.nn.models_dir .. "mlp.lua", args = {inputs = 784, hidden = "128,64", classes = 10}}
--
-- args: inputs (values per example, default 784), hidden (comma-separated widths, default
-- "128,64"), classes (default 10).
local nn = vt.nn
local inputs = args.inputs or 784
local hidden = args.hidden or "128,64"
local classes = args.classes or 10

local layers = {nn.Flatten()}
local width, i = inputs, 0
for h in tostring(hidden):gmatch("[^,]+") do
  layers[len(layers) + 1] = nn.Linear(width, tonumber(h)):named("fc" .. i)
  layers[len(layers) + 1] = nn.ReLU()
  width, i = tonumber(h), i + 1
end
layers[len(layers) + 1] = nn.Linear(width, classes):named("fc" .. i)
return nn.Sequential(layers)
