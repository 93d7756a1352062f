#!/usr/bin/env bash
# The GPU replay check run as plain worker processes (scripts/verify/pairs_worker.lua), with
# no driver script in between: trainers on cuda and native, then auditors on native and
# splitk4 for the cuda trainer and on cuda for the native one, for GPT 4x256 and ResNet-18
# w16, all models at once. Prints each run's RESULT lines and, per pair, whether the roots
# are equal. Builds first (scripts/gpu/build.sh) unless build-gpu/vtrun exists.
#
#   bash scripts/gpu/replay.sh [OUT_DIR] [STEPS] [WINDOWS_DIR]
#
# WINDOWS_DIR: calibrated windows (MODEL.json, as pairs.lua writes them); default: the paper's.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-replay}}
steps=${2:-200}
windows=${3:-}
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(date +%s)
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
vtrun=build-gpu/vtrun
worker=scripts/verify/pairs_worker.lua
w=/tmp/vt-gpu-replay
rm -rf "$w"
mkdir -p "$w"
win() { [[ -n $windows ]] && echo "$windows/$1.json"; }

# Probes of the calibration worker (it crashed on the GPU machine): with LuaJIT's compiler
# off, and without the cuda profile.
( $vtrun --profile native -e "jit.off()" $worker calibrate /tmp/p1.json gpt "$steps" native,splitk4,cuda \
    > "$out/probe-jitoff.txt" 2>&1; echo "exit $?" >> "$out/probe-jitoff.txt" ) &
( $vtrun --profile native $worker calibrate /tmp/p2.json gpt "$steps" native,splitk4 \
    > "$out/probe-cpu.txt" 2>&1; echo "exit $?" >> "$out/probe-cpu.txt" ) &

run() {  # NAME PROFILE ARGS...
  local name=$1 profile=$2
  shift 2
  local s=$(date +%s)
  $vtrun --profile "$profile" $worker "$@" > "$w/$name.out" 2>&1
  echo "RESULT exit=$? wall=$(($(date +%s) - s))" >> "$w/$name.out"
}
pids=()
for m in gpt resnet; do
  for p in cuda native; do
    run "$m-$p" "$p" train "$w/$m-$p" "$m" "$steps" "$(win $m)" &
    pids+=($!)
  done
done
wait "${pids[@]}"
echo "trainers: $(($(date +%s) - t0)) s"
pids=()
for m in gpt resnet; do
  run "$m-cuda-by-native" native audit "$w/$m-cuda" "$w/$m-cuda-by-native" "$m" "$steps" "$(win $m)" &
  pids+=($!)
  run "$m-cuda-by-splitk4" splitk4 audit "$w/$m-cuda" "$w/$m-cuda-by-splitk4" "$m" "$steps" "$(win $m)" &
  pids+=($!)
  run "$m-native-by-cuda" cuda audit "$w/$m-native" "$w/$m-native-by-cuda" "$m" "$steps" "$(win $m)" &
  pids+=($!)
done
wait "${pids[@]}"
for f in "$w"/*.out; do
  echo "== $(basename "$f" .out)"
  grep -E "^RESULT|rror|vtrun:" "$f"
done > "$out/runs.txt"
root() { grep -m1 "^RESULT root=" "$w/$1.out" | cut -d= -f2; }
{
  for m in gpt resnet; do
    for pair in cuda-by-native cuda-by-splitk4 native-by-cuda; do
      trainer=$m-${pair%%-by-*}
      a=$(root "$m-$pair") t=$(root "$trainer")
      ill=$(grep -m1 "^RESULT illegitimate=" "$w/$m-$pair.out" | cut -d= -f2)
      cor=$(grep -m1 "^RESULT corrections=" "$w/$m-$pair.out" | cut -d= -f2)
      verdict=DIFFER
      [[ -n $t && $a == "$t" && $ill == 0 ]] && verdict="equal root"
      echo "$m ${pair//-by-/ audited on }: $verdict (trainer ${t:0:16}, auditor ${a:0:16}, corrections $cor, illegitimate $ill)"
    done
  done
} | tee "$out/summary.txt"
wait
tail -n 3 "$out"/probe-*.txt
echo "done in $(($(date +%s) - t0)) s"
