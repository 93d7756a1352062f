#!/usr/bin/env bash
# The GPU check of issue 15, in one run on a machine with an NVIDIA GPU (README "GPU profile"):
# builds vtrun against that machine's LibTorch (scripts/gpu/build.sh), runs the CUDA rounding
# kernels' bit-for-bit comparison with the CPU kernels, then at once, for GPT 4x256 and
# ResNet-18 w16 (200 steps, windows calibrated over cuda, native and splitk4):
#   - scripts/verify/pairs.lua: trainer on cuda audited on native and on splitk4, trainer on
#     native audited on cuda (equal roots, 0 illegitimate entries, step times);
#   - scripts/verify/divergence.lua: cuda against native without logs (first differing step).
#
#   bash scripts/gpu/check.sh [OUT_DIR] [STEPS] [WINDOW]   # defaults: $OUT or ./gpu-check, 200, calibrated
#
# Fashion-MNIST (ResNet's data) is read from Debian's dataset-fashion-mnist folder; where the
# machine has none, from .gpu-data/fashion-mnist (copied there beside the Debian packages).
#
# Logs go to OUT_DIR (build.log, pairs-gpt.txt, pairs-resnet.txt, divergence-gpt.txt,
# divergence-resnet.txt, windows.tar); the last lines printed are the summary.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
out=${1:-${OUT:-gpu-check}}
steps=${2:-200}
window=${3:-calibrated}
if [[ ! -d /usr/share/datasets/fashion-mnist && -d .gpu-data/fashion-mnist ]]; then
  mkdir -p /usr/share/datasets && ln -s "$PWD/.gpu-data/fashion-mnist" /usr/share/datasets/fashion-mnist
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee "$out/build.log"
lscpu | grep -E "^Model name|^CPU\(s\)" | tee -a "$out/build.log"
if ! bash scripts/gpu/build.sh .gpu-debs build-gpu >> "$out/build.log" 2>&1; then
  tail -40 "$out/build.log"
  echo "SUMMARY build failed after $(($(date +%s) - t0)) s"
  exit 1
fi
echo "build: $(($(date +%s) - t0)) s"
# shellcheck disable=SC1091
source build-gpu/env.sh
vtrun=build-gpu/vtrun
if [[ -x build-gpu/vt_precision_cuda_compare ]]; then
  build-gpu/vt_precision_cuda_compare >> "$out/build.log" 2>&1
  echo "cuda_compare exit $?" | tee -a "$out/build.log"
  tail -5 "$out/build.log"
fi
$vtrun -e 'for _, p in ipairs(vt.profiles()) do print(p.name, p.available, p.unavailable or "") end' 2>&1 | tee -a "$out/build.log"

work=/tmp/vt-gpu-runs
rm -rf "$work"
mkdir -p "$work"
pairs=cuda:native,cuda:splitk4,native:cuda
for model in gpt resnet; do
  $vtrun scripts/verify/pairs.lua model=$model steps="$steps" window="$window" jobs=3 pairs=$pairs \
    dir="$work/$model" > "$out/pairs-$model.txt" 2>&1 &
  $vtrun scripts/verify/divergence.lua model=$model steps="$steps" profile_a=cuda profile_b=native \
    > "$out/divergence-$model.txt" 2>&1 &
done
wait
(cd "$work" && tar cf "$out/windows.tar" ./*/windows.json 2>/dev/null)
echo "== divergence"
tail -n 5 "$out"/divergence-*.txt
echo "== pairs"
tail -n 14 "$out"/pairs-*.txt
echo "SUMMARY done in $(($(date +%s) - t0)) s"
