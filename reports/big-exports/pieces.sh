#!/usr/bin/env bash
# Peak memory and wall time of some whole-run views (and summary) on the big exports, each in a
# fresh process with the report cache off, one run each, for the tree given (a commit, read from
# git into a temporary folder) or the working tree. From the repository root:
#   bash reports/big-exports/pieces.sh [--tree COMMIT] EXPORT "VIEW[ OPTIONS],..." [summary]
# e.g.  bash reports/big-exports/pieces.sh bench-exports/kernels-3000000.sqlite "nccl,hist" summary
set -uo pipefail
PY=${PYTHON:-python3}
root="$(pwd)"
tree="$root"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [ "${1:-}" = --tree ]; then
  git -C "$root" archive "$2" nsys_tools | tar -x -C "$work" && tree="$work"
  label="$(git -C "$root" rev-parse --short "$2")"
  shift 2
else
  label="$(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- nsys_tools || echo ' + changes')"
fi
export_path="$(realpath "$1")"
IFS=, read -ra VIEWS <<< "$2"
echo "## $1: $(stat -c %s "$export_path") bytes; tree $label; $(nproc) cores, shared; load: $(cut -d' ' -f1-3 /proc/loadavg)"
for view in "${VIEWS[@]}"; do
  printf '%-24s ' "$view"
  # shellcheck disable=SC2086  # a view's options are words
  (cd "$tree" && PYTHONPATH="$tree" NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" "$PY" -m nsys_tools report \
    "$export_path" --view $view --format csv -o "$work/out.csv" 2>&1 | grep -v '^Wrote' | tr '\n' ' ')
  if [ -f "$work/out.csv" ]; then
    echo "rows: $(($(wc -l < "$work/out.csv") - 1)); md5 $(md5sum < "$work/out.csv" | cut -c1-12)"
  else echo "rows: none"; fi
  rm -f "$work/out.csv"
done
if [ "${3:-}" = summary ]; then
  printf '%-24s ' summary
  (cd "$tree" && PYTHONPATH="$tree" NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" "$PY" -m nsys_tools summary \
    "$export_path" -o "$work/summary.md" 2>&1 | grep -v '^Wrote' | tr '\n' ' ')
  if [ -f "$work/summary.md" ]; then echo "lines: $(wc -l < "$work/summary.md"); md5 $(md5sum < "$work/summary.md" | cut -c1-12)"; else echo "lines: none"; fi
fi
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
