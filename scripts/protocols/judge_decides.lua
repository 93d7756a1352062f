-- Scenario "judge_decides": the learning rate x1.001 at step s only; under the paper's window only the judge's replay decides.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/judge_decides.lua [options]
os.exit(require("protocols.scenarios").main({"judge_decides"}, arg) and 0 or 1)
