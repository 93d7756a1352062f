-- Scenario "flip_within": from step s, every logged value within w/2 of its midpoint is rounded the other way (a move the auditor accepts up to w), and values with a wide window are moved by EXACT entries, at every boundary kind.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/flip_within.lua [options]
os.exit(require("protocols.scenarios").main({"flip_within"}, arg) and 0 or 1)
