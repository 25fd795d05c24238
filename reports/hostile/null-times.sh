#!/usr/bin/env bash
# The 3M-kernel first read (no Parquet cache) of the tree before and after a change, alternating,
# RUNS of each: wall time and peak RSS, and whether the two CSVs are byte-identical.
#   bash reports/hostile/null-times.sh BEFORE_COMMIT [RUNS]
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
git -C "$root" archive "$1" nsys_tools | tar -x -C "$work"
export_="$root/bench-exports/kernels-3000000.sqlite"
echo "# before: $1, after: $(git -C "$root" rev-parse --short HEAD)$(git -C "$root" diff --quiet HEAD -- nsys_tools || echo ' + changes'); $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq "${2:-2}"); do
  for side in before after; do
    tree="$root"; [ "$side" = before ] && tree="$work"
    t="$(cd "$root" && env NSYS_TOOLS_CACHE=0 PYTHONPATH="$tree" nice -n 5 /usr/bin/time -f "%e s %M KB" \
      "$python" -m nsys_tools report "$export_" --format csv -o "$work/$side.csv" 2>&1 >/dev/null | tail -1)"
    echo "$side run $i: $t"
  done
done
cmp -s "$work/before.csv" "$work/after.csv" && echo "outputs identical" || echo "outputs DIFFER"
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
