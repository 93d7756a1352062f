-- Scenario "withhold_record": the trainer discloses step s without one of its log records.
-- Trains (unless cached), audits on another profile and plays the verification game; exits 0
-- if the verdict is the one PROTOCOL.md requires. Options (key=value): see scenario_cli.lua (e.g.
-- setup=tiny, windows=paper,tight,calibrated, remote=true auditor=nofma judge=refblas).
--
--   build/vtrun scripts/protocols/withhold_record.lua [options]
os.exit(require("protocols.scenarios").main({"withhold_record"}, arg) and 0 or 1)
