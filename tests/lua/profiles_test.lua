-- Device profiles: every shipped pair really computes differently (bit differences on a
-- matmul, a conv and a reduction), each is deterministic, and misuse gives clear errors.
local T = require "vt.test"
local s = T.suite("profiles")

local vtrun = arg[-1]
local tmp = os.tmpname()
os.remove(tmp)
os.execute("mkdir -p " .. tmp)

-- Runs the probe computations under `profile` in a fresh process (process-level profiles need
-- one) and returns the three results.
local probe = [[
local dir, tag = ...
local a = vt.tensor.randn({64, 300}, {seed = 1})
local b = vt.tensor.randn({300, 48}, {seed = 2})
vt.ops.matmul(a, b):save(dir .. "/mm_" .. tag .. ".npy")
local x = vt.tensor.randn({4, 16, 12, 12}, {seed = 3})
local w = vt.tensor.randn({8, 16, 3, 3}, {seed = 4})
vt.ops.conv2d(x, w, {padding = 1}):save(dir .. "/conv_" .. tag .. ".npy")
local r = vt.tensor.randn({4001, 64}, {seed = 5})
vt.ops.sum(r, 1):save(dir .. "/sum_" .. tag .. ".npy")
local function save(what, t) t:save(dir .. "/" .. what .. "_" .. tag .. ".npy") end
-- The reductions inside layers, forward and backward.
local s = vt.tensor.randn({64, 777}, {seed = 6}) * 4
local gs = vt.tensor.randn({64, 777}, {seed = 7})
local y, gx = vt.ops.softmax(s, {grad = gs})
save("softmax", y); save("softmax_bwd", gx)
y, gx = vt.ops.log_softmax(s, {grad = gs})
save("log_softmax", y); save("log_softmax_bwd", gx)
local x = vt.tensor.randn({64, 768}, {seed = 8}) * 3 + 1
local w, b = vt.tensor.randn({768}, {seed = 9}), vt.tensor.randn({768}, {seed = 10})
local y2, gx2, gw2 = vt.ops.layer_norm(x, w, b, {grad = vt.tensor.randn({64, 768}, {seed = 11})})
save("layer_norm", y2); save("layer_norm_bwd", gx2); save("layer_norm_bwd_w", gw2)
local xb = vt.tensor.randn({16, 8, 12, 12}, {seed = 12}) * 2 + 0.5
local wb, bb = vt.tensor.randn({8}, {seed = 13}), vt.tensor.randn({8}, {seed = 14})
local y3, gx3 = vt.ops.batch_norm(xb, wb, bb, {grad = vt.tensor.randn({16, 8, 12, 12}, {seed = 15})})
save("batch_norm", y3); save("batch_norm_bwd", gx3)
local we = vt.tensor.randn({50, 32}, {seed = 16})
local idx = (vt.tensor.rand({2000}, {seed = 17}) * 50):floor():long()
local _, gwe = vt.ops.embedding(we, idx, {grad = vt.tensor.randn({2000, 32}, {seed = 18})})
save("embedding_bwd", gwe)
print(vt.profile().name, vt.profile().blas_library, vt.profile().aten_capability)
]]
-- What the probe saves, per profile: each must differ between every pair of profiles.
local probes = {"mm", "conv", "sum", "softmax", "softmax_bwd", "log_softmax", "log_softmax_bwd", "layer_norm",
                "layer_norm_bwd", "layer_norm_bwd_w", "batch_norm", "batch_norm_bwd", "embedding_bwd"}
local probe_path = tmp .. "/probe.lua"
local f = io.open(probe_path, "w")
f:write(probe)
f:close()

local function run_probe(profile, tag)
  local cmd = string.format("%q --profile %s %q %q %s 2>&1", vtrun, profile, probe_path, tmp, tag)
  local p = io.popen(cmd)
  local out = p:read("*a")
  local ok = p:close()
  assert(out:find(profile, 1, true), "probe under " .. profile .. " failed: " .. out)
  local r = {out = out}
  for _, what in ipairs(probes) do r[what] = vt.tensor.load(tmp .. "/" .. what .. "_" .. tag .. ".npy") end
  return r
end

-- The profiles this machine can run (avx512 needs an AVX-512 CPU).
local names, unavailable = {}, {}
for _, p in ipairs(vt.profiles()) do
  if p.available then names[#names + 1] = p.name else unavailable[#unavailable + 1] = p end
end

-- Each profile's probe results, computed on first use (any test may run alone under a filter).
local cached
local function results_of_all()
  if cached == nil then
    cached = {}
    for _, name in ipairs(names) do cached[name] = run_probe(name, name) end
  end
  return cached
end

s:test("at least eight profiles run here, native first", function()
  T.assert_true(#names >= 8, #names .. " runnable profiles")
  T.assert_eq(names[1], "native")
  for _, p in ipairs(vt.profiles()) do
    T.assert_true(type(p.description) == "string" and #p.description > 0)
    T.assert_true(p.gemm ~= nil and p.reduce ~= nil)
  end
end)

s:test("each profile runs and is deterministic", function()
  local results = results_of_all()
  for _, name in ipairs(names) do
    -- cuda's index-add uses atomics: its order, and so its bits, change from run to run.
    local again = name ~= "cuda" and run_probe(name, name .. "_again") or nil
    if again == nil then goto continue end
    for _, what in ipairs(probes) do
      T.assert_true(results[name][what]:equal(again[what]), name .. " " .. what .. " repeats bit for bit")
    end
    ::continue::
  end
end)

s:test("process-level profiles really load their BLAS and ATen kernels", function()
  local results = results_of_all()
  T.assert_true(results.refblas.out:find("/blas/libblas.so.3", 1, true) ~= nil, results.refblas.out)
  T.assert_true(results.blis.out:find("/blis-openmp/libblas.so.3", 1, true) ~= nil, results.blis.out)
  T.assert_true(results.scalar.out:find("NO AVX", 1, true) ~= nil, results.scalar.out)
  T.assert_true(results.native.out:find("AVX2", 1, true) ~= nil or results.native.out:find("NO AVX", 1, true) ~= nil,
                results.native.out)
  if results.avx512 then T.assert_true(results.avx512.out:find("AVX512", 1, true) ~= nil, results.avx512.out) end
end)

s:test("a profile this machine cannot run says why", function()
  for _, p in ipairs(unavailable) do
    local why = p.name == "cuda" and "needs a LibTorch built with CUDA and an NVIDIA GPU" or "needs a CPU with"
    T.assert_true(p.unavailable:find(why, 1, true) ~= nil, p.unavailable)
    T.assert_error(function() vt.set_profile(p.name) end, why, true)
    -- Nor can a process start under it.
    local out = io.popen(vtrun .. " --profile " .. p.name .. " -e 'print(1)' 2>&1"):read("*a")
    T.assert_true(out:find(why, 1, true) ~= nil, out)
  end
end)

s:test("every pair of profiles differs on every order-dependent op, forward and backward", function()
  local results = results_of_all()
  local identical = {}
  for i = 1, #names do
    for j = i + 1, #names do
      local a, b = results[names[i]], results[names[j]]
      for _, what in ipairs(probes) do
        if a[what]:equal(b[what]) then identical[#identical + 1] = names[i] .. " vs " .. names[j] .. ": " .. what end
        -- Honest differences are last-bit noise, not different answers.
        T.assert_true(a[what]:allclose(b[what], 1e-10, 1e-10), names[i] .. " vs " .. names[j] .. ": " .. what)
      end
    end
  end
  T.assert_eq(#identical, 0, "bit-identical: " .. table.concat(identical, "; "))
end)

s:test("in-process switching; process-level profiles refuse without a fresh process", function()
  local a = vt.tensor.randn({16, 200}, {seed = 1})
  vt.set_profile("splitk4")
  T.assert_eq(vt.profile().name, "splitk4")
  T.assert_eq(vt.threads(), 1)
  local m1 = vt.ops.matmul(a, a:t())
  vt.set_profile("native")
  local m2 = vt.ops.matmul(a, a:t())
  T.assert_false(m1:equal(m2))
  T.assert_error(function() vt.set_profile("refblas") end,
                 "vt.set_profile: profile 'refblas' sets process-level options (LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/blas); start the process with `vtrun --profile refblas`", true)
  T.assert_error(function() vt.set_profile("gpu9000") end, "unknown profile 'gpu9000' (valid: native, splitk4", true)
end)

s:test("--profile with an unknown name fails clearly", function()
  local p = io.popen(string.format("%q --profile nosuch -e 'print(1)' 2>&1; echo \"exit=$?\"", vtrun))
  local out = p:read("*a")
  p:close()
  T.assert_true(out:find("vtrun: --profile: unknown profile 'nosuch'", 1, true) ~= nil, out)
  T.assert_true(out:find("exit=1", 1, true) ~= nil, out)
end)

s:test("ops agree with ATen up to rounding", function()
  local a = vt.tensor.randn({5, 7, 9}, {seed = 8})
  T.assert_near(vt.ops.sum(a, {1, 3}), a:sum(1):sum(2), 1e-12)
  T.assert_near(vt.ops.sum(a), vt.tensor(a:sum()), 1e-12)
end)

local _, failed = T.run({exit = false})
os.execute("rm -rf " .. tmp)
os.exit(failed == 0 and 0 or 1)
