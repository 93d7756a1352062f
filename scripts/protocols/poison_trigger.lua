-- Scenario "poison_trigger": data poisoning from step s: a trigger patch on every other image, labelled 0.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/poison_trigger.lua [options]
os.exit(require("protocols.scenarios").main({"poison_trigger"}, arg) and 0 or 1)
