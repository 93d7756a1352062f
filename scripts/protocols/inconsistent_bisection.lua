-- Scenario "inconsistent_bisection": a poisoning trainer answers bisection queries with the honest run's leaves and proofs.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/inconsistent_bisection.lua [options]
os.exit(require("protocols.scenarios").main({"inconsistent_bisection"}, arg) and 0 or 1)
