#!/usr/bin/env bash
# Peak RSS of every view on an export whose busiest kernel has MB-long names (default 20),
# built by tests/fixtures/long-name/make.py from the bundled 2025.3 export. A run is killed
# past CAP_MB of RSS (default 6000) and reported as killed.
#   bash reports/hostile/long-name.sh [--tree COMMIT] [MB [CAP_MB]]
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tree="$root"
if [ "${1:-}" = --tree ]; then
  git -C "$root" archive "$2" nsys_tools capture kernels | tar -x -C "$work" && tree="$work"
  echo "# tree: $2"
  shift 2
else
  echo "# tree: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- nsys_tools || echo ' + changes')"
fi
mb="${1:-20}"
cap="${2:-6000}"
echo "# $(nproc) cores, $("$python" -c 'import polars; print("polars", polars.__version__)'), names of $mb MB, cap $cap MB"
export="$("$python" "$root/tests/fixtures/long-name/make.py" "$work/exports" "$mb")"
views="kernels ranges api memops gaps utilization launch sync idle nccl overlap stragglers hist pace"
for view in $views; do
  for format in markdown csv; do
    result="$(cd "$tree" && env PYTHONPATH="$tree" NSYS_TOOLS_CACHE=0 "$python" "$root/tests/peak_rss.py" "$cap" "$work/out" -- \
      "$python" -m nsys_tools report "$export" --view "$view" -f "$format" 2> "$work/err")"
    echo "$view $format: $result$(grep -m1 '^Error' "$work/err" | sed 's/^/; /' || true)"
  done
done
