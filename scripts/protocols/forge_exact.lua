-- Scenario "forge_exact": from step s, one value per boundary call (every kind) far from any midpoint is rounded the other way and logged EXACT.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/forge_exact.lua [options]
os.exit(require("protocols.scenarios").main({"forge_exact"}, arg) and 0 or 1)
