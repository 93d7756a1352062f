#!/usr/bin/env bash
# The GPU replay check as plain worker processes (scripts/verify/pairs_worker.lua), with no
# driver script in between: trainers on cuda and native, then auditors on native and splitk4
# for the cuda trainer and on cuda for the native one, for GPT 4x256 and ResNet-18 w16, all
# models at once. Prints each run's RESULT lines and, per pair, whether the roots are equal.
# Builds first (scripts/gpu/build.sh) unless build-gpu/vtrun exists.
#
#   bash scripts/gpu/replay.sh [OUT_DIR] [STEPS] [WINDOWS]
#
# WINDOWS: empty (default) for the paper's window; a folder of calibrated windows (MODEL.json,
# as pairs.lua writes them); or `calibrate`: windows calibrated here over native, cuda and
# splitk4 (vt.calibrate, 10 steps), beside a calibration over native and splitk4 alone to show
# what the GPU adds (scripts/verify/compare_windows.lua). Should a calibration fail, the
# windows in FALLBACK_WINDOWS (default .gpu-data/windows, CPU-calibrated) are used and the
# summary says so. SPLITK4=0 leaves out the splitk4 auditor of the cuda trainer (the longest run).
#
# Before the runs, short probes of the processes that died in the GPU build before (a driver
# spawning workers, vt.calibrate), each with its stderr and exit status in OUT_DIR/probe-*.txt;
# a crash prints vtrun's crash report (signal, caller, Lua lines) there.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-replay}}
steps=${2:-200}
windows=${3:-}
fallback=${FALLBACK_WINDOWS:-.gpu-data/windows}
splitk4=${SPLITK4:-1}  # SPLITK4=0: no splitk4 auditor of the cuda trainer (a shorter run)
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/machine.txt"
lscpu | grep -E "^Model name|^CPU\(s\)" | tee -a "$out/machine.txt"
if [[ ! -x build-gpu/vtrun ]] && ! bash scripts/gpu/build.sh .gpu-debs build-gpu > "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  exit 1
fi
echo "build: $(($(date +%s) - t0)) s"
# shellcheck disable=SC1091
source build-gpu/env.sh
if [[ ! -d /usr/share/datasets/fashion-mnist && -d .gpu-data/fashion-mnist ]]; then
  mkdir -p /usr/share/datasets && ln -s "$PWD/.gpu-data/fashion-mnist" /usr/share/datasets/fashion-mnist
fi
vtrun=$PWD/build-gpu/vtrun
worker=scripts/verify/pairs_worker.lua
w=/tmp/vt-gpu-replay
rm -rf "$w"
mkdir -p "$w"

probe() {  # NAME COMMAND...: runs in the background, output and exit status in probe-NAME.txt
  local name=$1
  shift
  ( timeout 180 "$@" > "$out/probe-$name.txt" 2>&1; echo "exit $?" >> "$out/probe-$name.txt" ) &
}
probe profiles "$vtrun" -e 'for _, p in ipairs(vt.profiles()) do print(p.name, p.available, p.unavailable or "") end'
probe fs bash -c "cd tests/lua && '$vtrun' fs_test.lua"
probe process bash -c "cd tests/lua && '$vtrun' process_test.lua"
probe driver "$vtrun" scripts/verify/pairs.lua model=mlp steps=3 window=paper pairs=native:cuda jobs=2 dir="$w/probe-driver"
probe calibrate "$vtrun" --profile native $worker calibrate "$w/probe-calibrate.json" mlp 3 native,cuda,splitk4

run() {  # NAME PROFILE ARGS...
  local name=$1 profile=$2
  shift 2
  local s=$(date +%s)
  timeout 420 "$vtrun" --profile "$profile" $worker "$@" > "$w/$name.out" 2>&1
  echo "RESULT exit=$? wall=$(($(date +%s) - s))" >> "$w/$name.out"
}
declare -A window_of window_note
cpu_calibrations=()
if [[ $windows == calibrate ]]; then
  pids=()
  for m in gpt resnet; do
    run "calibrate-$m-gpu" native calibrate "$w/$m-gpu.json" "$m" "$steps" native,cuda,splitk4 &
    pids+=($!)
    run "calibrate-$m-cpu" native calibrate "$w/$m-cpu.json" "$m" "$steps" native,splitk4 &
    cpu_calibrations+=($!)
  done
  wait "${pids[@]}"
  echo "calibration: $(($(date +%s) - t0)) s"
  for m in gpt resnet; do
    if [[ -s $w/$m-gpu.json ]]; then
      window_of[$m]=$w/$m-gpu.json
      window_note[$m]="windows calibrated here over native, cuda, splitk4"
      cp "$w/$m-gpu.json" "$out/windows-$m.json"
    else
      window_of[$m]=$fallback/$m.json
      window_note[$m]="FALLBACK: calibration with cuda failed; CPU-calibrated windows $fallback/$m.json"
    fi
  done
elif [[ -n $windows ]]; then
  for m in gpt resnet; do window_of[$m]=$windows/$m.json window_note[$m]="windows $windows/$m.json"; done
else
  for m in gpt resnet; do window_of[$m]="" window_note[$m]="the paper's window"; done
fi

pids=()
for m in gpt resnet; do
  for p in cuda native; do
    run "$m-$p" "$p" train "$w/$m-$p" "$m" "$steps" "${window_of[$m]}" &
    pids+=($!)
  done
done
wait "${pids[@]}"
echo "trainers: $(($(date +%s) - t0)) s"
pids=()
for m in gpt resnet; do
  run "$m-cuda-by-native" native audit "$w/$m-cuda" "$w/$m-cuda-by-native" "$m" "$steps" "${window_of[$m]}" &
  pids+=($!)
  if [[ $splitk4 == 1 ]]; then
    run "$m-cuda-by-splitk4" splitk4 audit "$w/$m-cuda" "$w/$m-cuda-by-splitk4" "$m" "$steps" "${window_of[$m]}" &
    pids+=($!)
  fi
  run "$m-native-by-cuda" cuda audit "$w/$m-native" "$w/$m-native-by-cuda" "$m" "$steps" "${window_of[$m]}" &
  pids+=($!)
done
wait "${pids[@]}"
echo "auditors: $(($(date +%s) - t0)) s"
for f in "$w"/*.out; do
  echo "== $(basename "$f" .out)"
  grep -E "^RESULT|rror|vtrun:|crashed|^  " "$f"
done > "$out/runs.txt"
[[ ${#cpu_calibrations[@]} -gt 0 ]] && wait "${cpu_calibrations[@]}"
root() { grep -m1 "^RESULT root=" "$w/$1.out" | cut -d= -f2; }
{
  for m in gpt resnet; do
    echo "$m: ${window_note[$m]}"
    for pair in cuda-by-native $([[ $splitk4 == 1 ]] && echo cuda-by-splitk4) native-by-cuda; do
      trainer=$m-${pair%%-by-*}
      a=$(root "$m-$pair") t=$(root "$trainer")
      ill=$(grep -m1 "^RESULT illegitimate=" "$w/$m-$pair.out" | cut -d= -f2)
      cor=$(grep -m1 "^RESULT corrections=" "$w/$m-$pair.out" | cut -d= -f2)
      ts=$(grep -m1 "^RESULT seconds=" "$w/$trainer.out" | cut -d= -f2)
      as=$(grep -m1 "^RESULT seconds=" "$w/$m-$pair.out" | cut -d= -f2)
      verdict=DIFFER
      [[ -n $t && $a == "$t" && $ill == 0 ]] && verdict="equal root"
      [[ -z $t ]] && verdict="NO RESULT: the trainer failed (runs.txt, $w/$trainer.out)"
      [[ -n $t && -z $a ]] && verdict="NO RESULT: the auditor failed (runs.txt, $w/$m-$pair.out)"
      echo "$m ${pair//-by-/ audited on }: $verdict (trainer ${t:0:16} ${ts}s, auditor ${a:0:16} ${as}s," \
           "corrections $cor, illegitimate $ill)"
    done
    if [[ -s $w/$m-gpu.json && -s $w/$m-cpu.json ]]; then
      "$vtrun" scripts/verify/compare_windows.lua "$w/$m-gpu.json" "$w/$m-cpu.json" with-cuda cpu-only
    fi
  done
} | tee "$out/summary.txt"
wait
for f in "$out"/probe-*.txt; do echo "== $(basename "$f")"; tail -n 12 "$f"; done
echo "done in $(($(date +%s) - t0)) s"
