#!/usr/bin/env bash
# Peak memory and wall time of every whole-run view, and of summary, on the big exports: each in
# a fresh process with the report cache off, one run each. From the repository root, after the
# exports are built (reports/big-exports.md says how):
#   bash reports/big-exports/whole-run-views-big.sh bench-exports/kernels-30000000.sqlite ... \
#     > reports/big-exports/whole-run-views-big.log 2>&1
# LIMIT (seconds, default 1200) stops a view that runs longer; the log says so.
set -uo pipefail
PY=${PYTHON:-python3}
LIMIT=${LIMIT:-1200}
OUT=${OUT:-bench-exports}
VIEWS=(utilization "utilization --window 10s" idle "idle --longest 10" launch sync nccl overlap stragglers hist pace)
for export in "$@"; do
  echo "## $export: $(stat -c %s "$export") bytes"
  "$PY" -c "
import sqlite3, sys
con = sqlite3.connect(f'file:{sys.argv[1]}?mode=ro', uri=True)
for t in ('CUPTI_ACTIVITY_KIND_KERNEL', 'CUPTI_ACTIVITY_KIND_MEMCPY', 'CUPTI_ACTIVITY_KIND_MEMSET', 'CUPTI_ACTIVITY_KIND_RUNTIME', 'NVTX_EVENTS'):
    print(f'#   {t}: max rowid {con.execute(f\"SELECT max(rowid) FROM {t}\").fetchone()[0]}')" "$export"
  echo "# $(nproc) cores, shared; load: $(cut -d' ' -f1-3 /proc/loadavg); $(git rev-parse --short HEAD)"
  for view in "${VIEWS[@]}"; do
    printf '%-24s ' "$view"
    rm -f "$OUT/out.csv"
    NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" timeout "$LIMIT" "$PY" -m nsys_tools report "$export" --view $view \
      --format csv -o "$OUT/out.csv" 2>&1 | grep -v '^Wrote' | tr '\n' ' '
    if [ -f "$OUT/out.csv" ]; then echo "rows: $(($(wc -l < "$OUT/out.csv") - 1))"; else echo "rows: none (stopped)"; fi
  done
  printf '%-24s ' summary
  rm -f "$OUT/summary.md"
  NSYS_TOOLS_CACHE=0 /usr/bin/time -f "%e s %M KB" timeout "$LIMIT" "$PY" -m nsys_tools summary "$export" -o "$OUT/summary.md" 2>&1 \
    | grep -v '^Wrote' | tr '\n' ' '
  if [ -f "$OUT/summary.md" ]; then echo "lines: $(wc -l < "$OUT/summary.md")"; else echo "lines: none (stopped)"; fi
  echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
done
