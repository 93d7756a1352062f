-- Rounding benchmark (issue 3): on Gaussian float64 tensors (16M elements by default), for
-- 1 and 2 threads and b = 32 and b = 26, the elements/s of round + classify + log, of replay,
-- of plain round without a log, and of memcpy of the same bytes, with the ratios; then per
-- encoding the encode/decode speed and bits per element in paper mode (band 0.25) and with a
-- calibrated-like window (band 0, alpha 2^-44), next to the entropy floor.
-- The last line is one JSON object; its headline (round_log_elems_per_s, memcpy_elems_per_s,
-- ratio_to_memcpy) is 1 thread, b = 32, paper mode. Target: ratio_to_memcpy >= 0.40.
--
--   vtrun scripts/bench/rounding.lua [elements=16777216] [repeats=5] [threads=1,2] [bits=32,26]
local opts = vt.args({elements = 16777216, repeats = 5, threads = {1, 2}, bits = {32, 26}}, arg)

local r = vt.bench_rounding{elements = opts.elements, repeats = opts.repeats,
                            threads = opts.threads, bits = opts.bits, alpha = 2 ^ -44}

local function find(what, mode, threads, bits)
  for _, k in ipairs(r.kernels) do
    if k.what == what and k.mode == mode and k.threads == threads and (bits == nil or k.bits == bits) then
      return k
    end
  end
end

print(string.format("rounding benchmark: %d float64 elements (Gaussian), best of %d, kernels: %s",
                    r.elements, opts.repeats, r.isa))
print()
print(string.format("%-7s %-4s %-10s %-11s %12s %10s %16s", "threads", "b", "kernel", "window",
                    "Melem/s", "GB/s in", "ratio_to_memcpy"))
for _, threads in ipairs(opts.threads) do
  local copy = find("memcpy", "", threads)
  print(string.format("%-7d %-4s %-10s %-11s %12.1f %10.2f %16.3f", threads, "-", "memcpy", "",
                      copy.elems_per_s / 1e6, copy.elems_per_s * 8 / 1e9, 1.0))
  for _, bits in ipairs(opts.bits) do
    for _, spec in ipairs{{"round_log", "paper"}, {"round_log", "calibrated"}, {"round", ""},
                          {"replay", "paper"}, {"replay", "calibrated"}} do
      local k = find(spec[1], spec[2], threads, bits)
      print(string.format("%-7d %-4d %-10s %-11s %12.1f %10.2f %16.3f", threads, bits, k.what,
                          k.mode, k.elems_per_s / 1e6, k.elems_per_s * 8 / 1e9,
                          k.elems_per_s / copy.elems_per_s))
    end
  end
end
-- Thread scaling of the headline kernel.
if #opts.threads > 1 then
  print()
  for _, bits in ipairs(opts.bits) do
    local one = find("round_log", "paper", opts.threads[1], bits)
    for i = 2, #opts.threads do
      local k = find("round_log", "paper", opts.threads[i], bits)
      print(string.format("round_log b=%d: %d threads / %d thread = %.2fx", bits, opts.threads[i],
                          opts.threads[1], k.elems_per_s / one.elems_per_s))
    end
  end
end

print()
print(string.format("%-11s %-4s %-7s %-7s %9s %8s %12s %10s %9s %11s %11s", "window", "b", "encoding",
                    "chosen", "logged%", "exact", "bytes", "bits/elem", "entropy", "enc Melem/s",
                    "dec Melem/s"))
for _, e in ipairs(r.encodings) do
  print(string.format("%-11s %-4d %-7s %-7s %9.4f %8d %12d %10.4f %9.4f %11.1f %11.1f", e.mode, e.bits,
                      e.encoding, e.chosen, 100 * e.logged_fraction, e.exact, e.bytes,
                      e.bits_per_element, e.entropy_bits, e.encode_elems_per_s / 1e6,
                      e.decode_elems_per_s / 1e6))
end

-- The JSON summary (last line).
local function json(value)
  local t = type(value)
  if t == "table" then
    local keys = {}
    for k in pairs(value) do keys[#keys + 1] = k end
    table.sort(keys)
    local parts = {}
    for _, k in ipairs(keys) do parts[#parts + 1] = string.format("%q:%s", k, json(value[k])) end
    return "{" .. table.concat(parts, ",") .. "}"
  elseif t == "string" then
    return string.format("%q", value)
  elseif t == "number" then
    if value ~= value or value == math.huge or value == -math.huge then return "null" end
    if value == math.floor(value) and math.abs(value) < 2 ^ 53 then return string.format("%d", value) end
    return string.format("%.6g", value)
  else
    return tostring(value)
  end
end

local headline_threads = opts.threads[1]
local head_bits = opts.bits[1]
local copy1 = find("memcpy", "", headline_threads)
local head = find("round_log", "paper", headline_threads, head_bits)
local summary = {
  isa = r.isa,
  elements = r.elements,
  threads = headline_threads,
  bits = head_bits,
  round_log_elems_per_s = head.elems_per_s,
  memcpy_elems_per_s = copy1.elems_per_s,
  ratio_to_memcpy = head.elems_per_s / copy1.elems_per_s,
  round_log_calibrated_ratio = find("round_log", "calibrated", headline_threads, head_bits).elems_per_s / copy1.elems_per_s,
  round_ratio = find("round", "", headline_threads, head_bits).elems_per_s / copy1.elems_per_s,
  replay_ratio = find("replay", "paper", headline_threads, head_bits).elems_per_s / copy1.elems_per_s,
  target_ratio = 0.40,
}
for _, e in ipairs(r.encodings) do
  if e.bits == head_bits then
    summary[e.mode .. "_" .. e.encoding .. "_bits_per_element"] = e.bits_per_element
    summary[e.mode .. "_entropy_bits"] = e.entropy_bits
  end
end
print(json(summary))
