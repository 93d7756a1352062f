-- Scenario "steer_paper_window": the same steering under the paper's window (band 0.25): caught since 2026-12-04.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/steer_paper_window.lua [options]
os.exit(require("protocols.scenarios").main({"steer_paper_window"}, arg) and 0 or 1)
