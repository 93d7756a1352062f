-- Scenario "replace_example": one training example of the batch is replaced at one random step r.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/replace_example.lua [options]
os.exit(require("protocols.scenarios").main({"replace_example"}, arg) and 0 or 1)
