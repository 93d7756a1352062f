-- Every scenario of PROTOCOL.md (and the adaptive attacks), one after the other on shared
-- training runs, under one logging window or several in turn (windows=paper,tight,calibrated
-- or windows=all), then a table: window, scenario, expected and actual outcome, disputed interval,
-- bisection rounds, the auditor's steerable values per step, the trainer's steered values per
-- step, illegitimate entries, logged entries per step, judge and training time. Exits 0 if
-- every verdict (and every further check of scenarios.lua) is the expected one, 1 otherwise.
--
--   build/vtrun scripts/protocols/all.lua [setup=tiny] [windows=all] [remote=true auditor=nofma judge=refblas] [json=out.json]
-- (key=value arguments, every one in protocols/scenario_cli.lua)
os.exit(require("protocols.scenarios").main(nil, arg) and 0 or 1)
