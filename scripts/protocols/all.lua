-- Every scenario of PROTOCOL.md, one after the other on shared training runs, then a table:
-- outcome, disputed interval, bisection rounds, judge time against training time, and logged
-- (steerable) entries per step. Exits 0 if every verdict is the required one.
--
--   build/vtrun scripts/protocols/all.lua [--setup tiny] [--remote --auditor nofma --judge refblas] [--json out.json]
os.exit(require("protocols.scenarios").main(nil, arg) and 0 or 1)
