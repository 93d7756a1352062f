-- Optimizer benchmark (issue 17, "rounding fused into the ops"): one parameter of `elements`
-- float64 values (8M by default), updated by SGD (momentum 0.9, weight decay 5e-4) and AdamW,
-- per thread count: a plain FP64 step, the trainer's step with the paper window (the gradient's
-- boundary and every pass rounded, classified and logged) and the auditor's replay of its log,
-- each with the optimizer's passes fused into their boundaries' rounding passes, all of them in
-- one pass over memory (the default: StepContext::ApplyProducedChain), and with each pass
-- followed by its boundary (one more pass over memory per boundary). Seconds are
-- medians of `repeats` steps after one untimed step.
-- The last line is one JSON object: per kind and thread count the seconds and the ratios
-- fused_over_unfused (trainer and auditor) and trainer_over_fp64 / auditor_over_fp64.
--
--   vtrun scripts/bench/optimizer.lua [elements=8388608] [repeats=5] [threads=1,2]
local opts = vt.args({elements = 8388608, repeats = 5, threads = {1, 2}}, arg)

local rows = vt.bench_optimizer{elements = opts.elements, repeats = opts.repeats,
                                threads = opts.threads}

print(string.format("optimizer benchmark: one parameter of %d float64 values, median of %d steps",
                    opts.elements, opts.repeats))
print()
print(string.format("%-6s %7s %9s %11s %11s %11s %11s %9s %9s %9s %9s", "kind", "threads",
                    "fp64 s", "tr fused s", "tr split s", "au fused s", "au split s",
                    "tr f/s", "au f/s", "tr/fp64", "au/fp64"))
local json = {elements = opts.elements}
for _, r in ipairs(rows) do
  local ratios = {
    trainer_fused_over_unfused = r.trainer_fused / r.trainer_unfused,
    auditor_fused_over_unfused = r.auditor_fused / r.auditor_unfused,
    trainer_over_fp64 = r.trainer_fused / r.fp64,
    auditor_over_fp64 = r.auditor_fused / r.fp64,
  }
  print(string.format("%-6s %7d %9.4f %11.4f %11.4f %11.4f %11.4f %9.3f %9.3f %9.3f %9.3f",
                      r.kind, r.threads, r.fp64, r.trainer_fused, r.trainer_unfused,
                      r.auditor_fused, r.auditor_unfused, ratios.trainer_fused_over_unfused,
                      ratios.auditor_fused_over_unfused, ratios.trainer_over_fp64,
                      ratios.auditor_over_fp64))
  local entry = {}
  for k, v in pairs(r) do if k ~= "kind" and k ~= "threads" then entry[k] = v end end
  for k, v in pairs(ratios) do entry[k] = v end
  json[r.kind .. "_threads" .. r.threads] = entry
end
print()
print(vt.json.encode(json))
