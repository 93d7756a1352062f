-- Scenario "auditor_refuses": auditor refuses the judge's leaf query in a dispute.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/auditor_refuses.lua [options]
os.exit(require("protocols.scenarios").main({"auditor_refuses"}, arg) and 0 or 1)
