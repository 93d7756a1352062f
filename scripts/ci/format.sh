#!/usr/bin/env bash
# Checks that every C++ and CUDA source follows the repository's .clang-format (Debian 12's
# clang-format 14, installed here when missing), and lists the files that do not.
#
#   bash scripts/ci/format.sh          # check; exit 1 if any file differs
#   bash scripts/ci/format.sh --fix    # rewrite the files in place
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

if [[ -z "${CLANG_FORMAT:-}" ]] && ! command -v clang-format-14 >/dev/null; then
  echo "format: installing clang-format-14"
  SUDO=()
  if [[ $(id -u) -ne 0 ]]; then SUDO=(sudo); fi
  export DEBIAN_FRONTEND=noninteractive
  "${SUDO[@]}" apt-get update -q
  "${SUDO[@]}" apt-get install -y -q --no-install-recommends clang-format-14
fi
CLANG_FORMAT=${CLANG_FORMAT:-$(command -v clang-format-14 || command -v clang-format || true)}
if [[ -z "$CLANG_FORMAT" ]]; then
  echo "format: clang-format not found (bash scripts/setup.sh --deps installs it)" >&2
  exit 1
fi
mapfile -t files < <(find runtime bindings store tests \( -name '*.cc' -o -name '*.h' -o -name '*.cu' \) \
                       -not -path 'tests/fuzz/corpus/*' | sort)
if [[ "${1:-}" == "--fix" ]]; then
  "$CLANG_FORMAT" -i "${files[@]}"
  echo "format: ${#files[@]} files formatted"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  "$CLANG_FORMAT" --dry-run -Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if ((${#bad[@]} > 0)); then
  echo "format: ${#bad[@]} of ${#files[@]} files differ from .clang-format (bash scripts/ci/format.sh --fix):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files follow .clang-format"
