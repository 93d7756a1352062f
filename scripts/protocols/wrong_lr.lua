-- Scenario "wrong_lr": wrong hyperparameter from step s: learning rate x10.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/wrong_lr.lua [options]
os.exit(require("protocols.scenarios").main({"wrong_lr"}, arg) and 0 or 1)
