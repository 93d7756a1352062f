-- An auditor in a process of its own (run by nn_test.lua as `vtrun --profile P nn_party.lua
-- SPEC_FILE LOGS_DIR RUN_ID OUT_DIR`): it knows the model only from the spec's text, rebuilds
-- it, replays the logs and prints {"root": ..., "illegitimate": ...} as one JSON line.
local spec_file, logs_dir, run_id, out_dir = arg[1], arg[2], arg[3], arg[4]
local f = assert(io.open(spec_file, "rb"))
local spec = vt.spec.parse(f:read("*a"))
f:close()
local data = vt.data.fashion_mnist{limit = 256}
local auditor = vt.auditor{spec = spec, data = data, logs = vt.store.open(logs_dir, {read_only = true}),
                           logs_run = run_id, store = vt.store.open(out_dir)}
local r = auditor:run{progress = false}
print(vt.json.encode{root = r.root, illegitimate = r.illegitimate, corrections = r.corrections})
