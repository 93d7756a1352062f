-- The precision core in Lua: vt.round, vt.replay, vt.grid, vt.log.decode and vt.LogRecord
-- (docs/api/precision.md), including their errors.
local T = require "vt.test"
local s = T.suite("precision")

local function gaussian(n, seed)
  return vt.tensor.randn(n, {seed = seed})
end

s:test("round defaults: b = 32 equals a float32 round trip, with a record", function()
  local x = gaussian(10000, 1)
  local y, record = vt.round(x)
  T.assert_true(vt.tensor.is_tensor(y))
  T.assert_eq(y:dtype(), "float64")
  T.assert_true(y:equal(x:float():double()))
  T.assert_eq(#record, 10000)
  local c = record:counts()
  T.assert_eq(c.none + c.down + c.up + c.exact, 10000)
  T.assert_eq(c.exact, 0)  -- paper mode never needs EXACT
  T.assert_true(c.down > 2000 and c.up > 2000, "paper mode logs about half")
  T.assert_true(tostring(record):find("^vt%.LogRecord%(n=10000, none=") ~= nil)
end)

s:test("log = false returns nil for the record; shapes are kept", function()
  local x = gaussian(24, 2):reshape(4, 6)
  local y, record = vt.round(x, {bits = 26, log = false})
  T.assert_eq(record, nil)
  T.assert_eq(y:shape(), {4, 6})
  local y2 = vt.round(x, {bits = 26})
  T.assert_true(y:equal(y2))
end)

s:test("known answers: ties to even and carries", function()
  local x = vt.tensor{1 + 2 ^ -24, 1 + 3 * 2 ^ -24, 2 - 2 ^ -24, -(1 + 2 ^ -24), 1.25, 1.75}
  local y = vt.round(x, {log = false})
  T.assert_eq(y:totable(), {1, 1 + 2 ^ -22, 2, -1, 1.25, 1.75})
  local y10 = vt.round(x, {bits = 10, log = false})
  T.assert_eq(y10:totable(), {1, 1, 2, -1, 1, 2})
end)

s:test("states: uint8 tensor 0 none, 1 down, 2 up, 3 exact, matching counts", function()
  -- scale 1000, alpha 2^-40: the tiny values become EXACT.
  local x = vt.tensor{1000, 3.3e-7, -2.7e-9, 1e-30, 0, 1 + 2 ^ -24, 1 + 3 * 2 ^ -24, -(1 + 2 ^ -24)}
  local y, record = vt.round(x, {band = 0.0, alpha = 2 ^ -40})
  local st = record:states()
  T.assert_eq(st:dtype(), "uint8")
  T.assert_eq(st:totable(), {0, 3, 3, 3, 0, 1, 2, 2})
  local c = record:counts()
  T.assert_eq(c, {none = 2, down = 1, up = 2, exact = 3})
  for v = 0, 3 do
    local name = ({[0] = "none", "down", "up", "exact"})[v]
    T.assert_eq(st:eq(v):sum(), c[name])
  end
end)

s:test("replay of the own log reproduces the result; report fields", function()
  local x = gaussian(5000, 3)
  for _, o in ipairs{{bits = 32}, {bits = 26, band = 0.1}, {bits = 32, band = 0, alpha = 2 ^ -44}} do
    local y, record = vt.round(x, o)
    local z, report = vt.replay(x, record, o)
    T.assert_true(z:equal(y))
    T.assert_eq(report.corrections, 0)
    T.assert_eq(report.illegitimate, 0)
    T.assert_eq(report.near_misses, 0)
    T.assert_eq(report.elements, 5000)
    local c = record:counts()
    T.assert_eq(report.logged, c.down + c.up + c.exact)
    -- Replaying from the encoded bytes gives the same.
    local z2 = vt.replay(x, record:encode(), o)
    T.assert_true(z2:equal(y))
  end
end)

s:test("replay of perturbed values: within the window exact, flipped entries corrected", function()
  -- Values near midpoints at b = 32: the trainer logs them; an auditor whose values differ by
  -- far less than the window replays the trainer's result exactly.
  local n = 1000
  local vals = {}
  for i = 1, n do vals[i] = 1 + (i % 50) * 2 ^ -23 + 2 ^ -24 + (i % 7 - 3) * 2 ^ -30 end
  local x = vt.tensor(vals)
  local y, record = vt.round(x)
  local xp = x + 2 ^ -40
  local z, report = vt.replay(xp, record)
  T.assert_true(z:equal(y))
  T.assert_eq(report.illegitimate, 0)
  T.assert_true(report.corrections > 0, "some perturbed values crossed their midpoint")
  -- Without the log the auditor's plain rounding differs.
  T.assert_false(vt.round(xp, {log = false}):equal(y))
end)

s:test("encode / decode round trips for every encoding", function()
  local x = gaussian(3000, 4)
  for _, o in ipairs{{}, {band = 0, alpha = 2 ^ -44}, {band = 0.5}} do
    local _, record = vt.round(x, o)
    for _, enc in ipairs{"dense", "sparse", "auto"} do
      local bytes = record:encode(enc)
      T.assert_eq(type(bytes), "string")
      T.assert_eq(bytes:sub(1, 4), "VTLG")
      local back = vt.log.decode(bytes)
      T.assert_eq(#back, #record)
      T.assert_eq(back:counts(), record:counts())
      T.assert_true(back:states():equal(record:states()))
      T.assert_eq(back:encode(enc), bytes)
      T.assert_near(record:bits_per_element(enc), 8 * #bytes / 3000, 1e-12)
    end
    local auto = #record:encode("auto")
    T.assert_eq(auto, math.min(#record:encode("dense"), #record:encode("sparse")))
    T.assert_eq(#record:encode(), auto)
  end
end)

s:test("bits per element and entropy floor", function()
  local x = gaussian(100000, 5)
  local _, paper = vt.round(x)
  T.assert_near(paper:bits_per_element("dense"), 1.6, 0.002)  -- plus the header
  T.assert_near(paper:entropy_bits(), 1.5, 0.01)
  local _, calibrated = vt.round(x, {band = 0, alpha = 2 ^ -44})
  T.assert_true(calibrated:bits_per_element() < 0.05)
  T.assert_true(calibrated:entropy_bits() < 0.01)
  T.assert_true(calibrated:bits_per_element("sparse") < calibrated:bits_per_element("dense"))
end)

s:test("vt.grid returns lo <= x <= hi on the b-grid", function()
  -- b = 10 keeps one explicit mantissa bit: {1, 1.5} in [1, 2); spacing 2^-127 near zero.
  local x = vt.tensor{1.3, -1.3, 0, 2 ^ -149 * 1.5, 6}
  local lo, hi = vt.grid(x, 10)
  T.assert_eq(lo:totable(), {1, -1.5, 0, 0, 6})
  T.assert_eq(hi:totable(), {1.5, -1, 0, 2 ^ -127, 6})
  local lo32, hi32 = vt.grid(x)
  T.assert_true(lo32:le(x):all() and hi32:ge(x):all())
end)

s:test("errors: options, tensors, values", function()
  local x = vt.tensor{1, 2, 3}
  T.assert_error(function() vt.round(x, {bits = 9}) end, "vt.round: bits must be an integer in [10, 32], got 9", true)
  T.assert_error(function() vt.round(x, {bits = 33}) end, "[10, 32], got 33", true)
  T.assert_error(function() vt.round(x, {bits = 26.5}) end, "option 'bits' must be an integer", true)
  T.assert_error(function() vt.round(x, {band = 0.7}) end, "vt.round: band must be in [0, 0.5], got 0.7", true)
  T.assert_error(function() vt.round(x, {alpha = -1}) end, "vt.round: alpha must be finite and >= 0, got -1", true)
  T.assert_error(function() vt.round(x, {colour = 1}) end,
                 "vt.round: unknown option 'colour' (valid: alpha, band, bits, log, magnitude, name, step)", true)
  T.assert_error(function() vt.round(x, {log = 1}) end, "option 'log' must be a boolean", true)
  T.assert_error(function() vt.round(x:float()) end, "vt.round: input must be a float64 tensor, got float32", true)
  T.assert_error(function() vt.round(42) end, "vt.Tensor expected", true)
  T.assert_error(function() vt.round(vt.tensor{1, 0 / 0, 2}, {name = "blk.attn:fwd", step = 41}) end,
                 "vt.round: NaN at 'blk.attn:fwd', step 41, index 1", true)
  T.assert_error(function() vt.round(vt.tensor{1, 1 / 0}) end, "vt.round: infinite value at index 1: inf", true)
  T.assert_error(function() vt.round(vt.tensor{4e38}) end, "overflow at index 0: 4e+38 rounds beyond the FP32 range", true)
  T.assert_error(function() vt.round(x, {step = -2}) end, "option 'step' must be >= 0", true)
  T.assert_error(function() vt.replay(x, "garbage") end, "vt.replay: invalid log record: bad magic", true)
  local _, record = vt.round(x)
  T.assert_error(function() vt.replay(vt.tensor{1, 2}, record) end,
                 "vt.replay: log record has 3 elements but the tensor has 2", true)
  T.assert_error(function() vt.replay(vt.tensor{1, 2}, record:encode()) end,
                 "vt.replay: log record has 3 elements but the tensor has 2", true)
  T.assert_error(function() vt.replay(x, record, {log = true}) end, "unknown option 'log'", true)
  T.assert_error(function() vt.replay(x, 5) end, "vt.LogRecord or encoded string expected", true)
  T.assert_error(function() record:encode("zip") end, "unknown log encoding 'zip' (valid: auto, dense, sparse)", true)
  T.assert_error(function() record:bits_per_element("zip") end, "unknown log encoding 'zip'", true)
  T.assert_error(function() vt.log.decode("VTLG\1\9\0\0\0\0") end, "vt.log.decode: invalid log record: unknown encoding 9", true)
  T.assert_error(function() vt.log.decode(record:encode() .. "x") end, "1 trailing bytes", true)
  T.assert_error(function() vt.log.decode(record:encode("dense"), {max_elements = 2}) end,
                 "element count 3 exceeds the limit 2", true)
  T.assert_error(function() vt.log.decode(nil) end, "string expected", true)
  T.assert_error(function() vt.grid(x, 40) end, "vt.grid: bits must be an integer in [10, 32], got 40", true)
  T.assert_error(function() vt.grid(vt.tensor{0 / 0}) end, "vt.grid: NaN at index 0", true)
  T.assert_error(function() record.counts(5) end, "vt.LogRecord expected", true)
end)

s:test("magnitude: per element, \"own\", and errors naming what is allowed", function()
  -- 1e-6 next to a value of 1: with the tensor's scale, alpha = 2^-30 is wide against the
  -- small value's spacing (logged EXACT); with each value its own magnitude it is not.
  local x = vt.tensor{1.0, 1e-6 + 2 ^ -44}
  local _, by_scale = vt.round(x, {band = 0, alpha = 2 ^ -30})
  local _, by_own = vt.round(x, {band = 0, alpha = 2 ^ -30, magnitude = "own"})
  local _, by_tensor = vt.round(x, {band = 0, alpha = 2 ^ -30, magnitude = x:abs()})
  T.assert_eq(by_scale:counts().exact, 1)
  local c = by_own:counts()
  T.assert_eq(c.down + c.up + c.exact, 0)
  T.assert_eq(by_tensor:encode(), by_own:encode())
  local y, report = vt.replay(x, by_own, {band = 0, alpha = 2 ^ -30, magnitude = "own"})
  T.assert_eq(report.illegitimate, 0)
  T.assert_error(function() vt.round(x, {alpha = 1e-9, magnitude = "max"}) end, "option 'magnitude' must be")
  T.assert_error(function() vt.round(x, {alpha = 1e-9, magnitude = vt.tensor{1.0}}) end,
                 "magnitude has 1 elements but the tensor has 2")
  T.assert_error(function() vt.round(x, {alpha = 1e-9, magnitude = vt.tensor{1.0, -1.0}}) end,
                 "bad magnitude at index 1")
end)

s:test("non-contiguous tensors are accepted", function()
  local x = gaussian(600, 6):reshape(20, 30):t()
  T.assert_false(x:is_contiguous())
  local y = vt.round(x, {log = false})
  T.assert_eq(y:shape(), {30, 20})
  T.assert_true(y:equal(vt.round(x:contiguous(), {log = false})))
  local z, report = vt.replay(x, select(2, vt.round(x)))
  T.assert_true(z:equal(y))
  T.assert_eq(report.corrections, 0)
end)

s:test("vt.bench_optimizer times every arm and names bad options", function()
  local rows = vt.bench_optimizer{elements = 5000, repeats = 1, threads = {1}}
  T.assert_eq(#rows, 2)
  T.assert_eq(rows[1].kind, "sgd")
  T.assert_eq(rows[2].kind, "adamw")
  for _, r in ipairs(rows) do
    T.assert_eq(r.threads, 1)
    for _, k in ipairs{"fp64", "trainer_fused", "trainer_unfused", "auditor_fused", "auditor_unfused"} do
      T.assert_true(r[k] > 0 and r[k] < 60, k .. " = " .. tostring(r[k]))
    end
  end
  T.assert_error(function() vt.bench_optimizer{elements = 0} end, "elements must be >= 1, got 0")
  T.assert_error(function() vt.bench_optimizer{repeats = 0} end, "repeats must be >= 1, got 0")
  T.assert_error(function() vt.bench_optimizer{threads = {0}} end, "thread counts must be >= 1, got 0")
  T.assert_error(function() vt.bench_optimizer{threads = {}} end, "threads must not be empty")
  T.assert_error(function() vt.bench_optimizer{steps = 3} end, "steps")
end)

T.run()
