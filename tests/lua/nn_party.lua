-- A party in a process of its own, run by nn_test.lua; it knows the model only from the spec's
-- text, rebuilds it and prints one JSON line {"root": ..., "illegitimate": ...}.
--   vtrun --profile P nn_party.lua audit SPEC_FILE LOGS_DIR RUN_ID OUT_DIR
--   vtrun --nproc N nn_party.lua train SPEC_FILE - - OUT_DIR    (rank r on profile native/splitk4)
local role, spec_file, logs_dir, run_id, out_dir = arg[1], arg[2], arg[3], arg[4], arg[5]
local f = assert(io.open(spec_file, "rb"))
local spec = vt.spec.parse(f:read("*a"))
f:close()
local data = vt.data.fashion_mnist{limit = 256}
local runner
if role == "audit" then
  runner = vt.auditor{spec = spec, data = data, logs = vt.store.open(logs_dir, {read_only = true}),
                      logs_run = run_id, store = vt.store.open(out_dir)}
else
  local rank = vt.dist.rank()
  runner = vt.trainer{spec = spec, data = data, store = rank == 0 and vt.store.open(out_dir) or nil,
                      profile = rank % 2 == 0 and "native" or "splitk4"}
end
local r = runner:run{progress = false}
if vt.dist.rank() == 0 then
  print(vt.json.encode{root = r.root, illegitimate = r.illegitimate or 0, corrections = r.corrections or 0})
end
