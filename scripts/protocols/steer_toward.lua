-- Scenario "steer_toward": from step s, a greedy backdoor with legitimate entries only: each value of the
-- gradient and update boundaries that can be rounded the way that lowers a trigger loss is.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/steer_toward.lua [options]
os.exit(require("protocols.scenarios").main({"steer_toward"}, arg) and 0 or 1)
