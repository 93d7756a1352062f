-- Scenario "rewrite_logs": trainer rewrites the logs of step s after committing.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/rewrite_logs.lua [options]
os.exit(require("protocols.scenarios").main({"rewrite_logs"}, arg) and 0 or 1)
