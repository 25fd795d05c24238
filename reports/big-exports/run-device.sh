#!/usr/bin/env bash
# nsys-tools against nsys stats on one machine, and the Dask fleet benchmark (big-exports.md).
#
# On the GPU host, from the repository root, after the staging calls of pack-stack.sh:
#   source .device/nsys-env.sh; PYTHONUNBUFFERED=1 bash reports/big-exports/run-device.sh .stage
# Anywhere with the analysis stack installed (nsys optional), from the repository root:
#   PYTHON=.venv/bin/python OUT=/tmp/out bash reports/big-exports/run-device.sh
#
# 1. unpacks the staged stack (the parts in /tmp/nsys-tools-stack plus the one carried now) into
#    /tmp/nsys-tools-stack/site, checking every part against SHA256SUMS;
# 2. builds a 3M-kernel export from a real one with `nsys-tools bench`, then times
#    `nsys stats -r cuda_gpu_kern_sum:nvtx-name` ($NSYS; skipped with a message when absent) and
#    `nsys-tools report` (first read, then from the cache) pinned to cores 0-1, then to all cores;
# 3. times the report over 32 copies of a 100k-kernel export on local Dask clusters of 1, 2, 4
#    and 8 workers (2 threads each), then on threads in one process;
# 4. writes every timing into $OUT/big-exports-device.json and this log into $OUT/run-device.log.
# KERNELS, FLEET_KERNELS, EXPORTS, WORKERS and SOURCE override the sizes and the export replicated.
set -uo pipefail
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
exec > >(tee -a "$OUT/run-device.log") 2>&1
PY=${PYTHON:-python3}
ROOT=$(pwd)
[ -d "$ROOT/nsys_tools" ] || ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SOURCE=${SOURCE:-$ROOT/source.sqlite}
[ -f "$SOURCE" ] || SOURCE=$ROOT/tests/fixtures/layernorm-3impl/layernorm-3impl-nsys2025.3.sqlite
KERNELS=${KERNELS:-3000000}
FLEET_KERNELS=${FLEET_KERNELS:-100000}
EXPORTS=${EXPORTS:-32}
WORKERS=${WORKERS:-1,2,4,8}
WORK=${WORK:-/tmp/nsys-tools-bench}
STACK=/tmp/nsys-tools-stack
start=$(date +%s)
say() { echo "[$(($(date +%s) - start)) s] $*"; }

# 1. The analysis stack.
if [ -n "${1:-}" ]; then
  stage=$(cd "$1" && pwd)
  mkdir -p "$STACK" && cp "$stage"/part-* "$STACK"/
  missing=$(awk '$2 ~ /^part-/ {print $2}' "$stage/SHA256SUMS" | while read -r p; do [ -f "$STACK/$p" ] || echo "$p"; done)
  if [ -n "$missing" ]; then
    say "missing parts in $STACK: $(echo $missing): the machine was given back between the staging calls; make them again, back to back"
    exit 3
  fi
  (cd "$STACK" && grep ' part-' "$stage/SHA256SUMS" | sha256sum -c --quiet) || { say "a part is damaged"; exit 3; }
  if [ ! -f "$STACK/site/.complete" ]; then
    rm -rf "$STACK/site" && mkdir -p "$STACK/site"
    cat "$STACK"/part-* | xz -dc | tar -x -C "$STACK/site" && touch "$STACK/site/.complete" || { say "cannot unpack the stack"; exit 3; }
  fi
  export PYTHONPATH=$STACK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}
  say "stack unpacked: $(du -sh "$STACK/site" | cut -f1)"
else
  export PYTHONPATH=$ROOT${PYTHONPATH:+:$PYTHONPATH}
fi
"$PY" -c "import polars, connectorx, dask, distributed, typer, rich" || { say "the analysis stack does not import (see above)"; exit 4; }

cores=$("$PY" -c "import os; print(len(os.sched_getaffinity(0)))")
if [ -n "${NSYS:-}" ] && [ -x "$NSYS" ]; then
  baseline=nsys
  nsys_version=$("$NSYS" --version 2>&1 | tail -1)
  say "nsys: $nsys_version"
else
  baseline=none
  nsys_version=""
  say "nsys not found (\$NSYS is not an executable): skipping nsys stats, timing nsys-tools alone"
fi
"$PY" - "$OUT/environment.json" "$nsys_version" <<'PY'
import json, os, platform, sys
from importlib.metadata import version
cpu = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), platform.processor())
env = {"cpu": cpu, "cores": len(os.sched_getaffinity(0)), "memory_bytes": os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"),
       "python": platform.python_version(), "nsys": sys.argv[2] or None,
       "packages": {p: version(p) for p in ("polars", "connectorx", "pyarrow", "dask", "distributed", "typer")}}
json.dump(env, open(sys.argv[1], "w"), indent=1)
print(json.dumps(env))
PY

# 2. Side by side, pinned: two cores, then all of them.
pins=(0-1)
[ "$cores" -gt 2 ] && pins+=("0-$((cores - 1))")
for cpus in "${pins[@]}"; do
  label=cpus-$cpus
  say "side by side on cores $cpus ($baseline)"
  timeout 240 "$PY" -m nsys_tools bench --kernels "$KERNELS" --source "$SOURCE" --workdir "$WORK" --cpus "$cpus" \
    --baseline "$baseline" --format json --output "$OUT/side-by-side-$label.json" || say "side by side on $cpus failed or timed out"
done

# 3. The fleet on Dask.
say "fleet: $EXPORTS exports of $FLEET_KERNELS kernels, workers $WORKERS"
timeout 240 "$PY" -m nsys_tools bench --workers "$WORKERS" --exports "$EXPORTS" --kernels "$FLEET_KERNELS" --threads-per-worker 2 \
  --source "$SOURCE" --workdir "$WORK" --format json --output "$OUT/scaling.json" || say "the fleet benchmark failed or timed out"

# 4. One JSON, and a summary.
"$PY" - "$OUT" <<'PY'
import json, sys
from pathlib import Path
out = Path(sys.argv[1])
load = lambda p: json.loads(p.read_text()) if p.exists() else None
doc = {"environment": load(out / "environment.json"),
       "side_by_side": {p.stem.removeprefix("side-by-side-"): load(p) for p in sorted(out.glob("side-by-side-*.json"))},
       "scaling": load(out / "scaling.json")}
(out / "big-exports-device.json").write_text(json.dumps(doc, indent=1))
for name, rows in doc["side_by_side"].items():
    for r in rows or []:
        print(f"{name:12} {r['tool']:40} {r['wall_s']:8.2f} s {r['peak_bytes'] / 2**20:7.0f} MiB  speedup {r['speedup']}  mismatches {r['mismatches']}")
for r in doc["scaling"] or []:
    print(f"{r['engine']:16} {r['wall_s']:7.2f} s (start-up {r['startup_s']:.2f} s) speedup {r['speedup']:.2f} same table {r['same_table']}")
PY
say "done: $OUT/big-exports-device.json"
