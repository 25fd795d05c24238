#!/usr/bin/env bash
# The nsys side of deep-nesting.md: times `$NSYS stats -r nvtx_sum -f csv` (and
# nvtx_gpu_proj_sum, the report the ranges view reproduces) on exports with 10, 1,000, 5,000 and
# 10,000 nested NVTX ranges, built by tests/fixtures/deep-nesting/make.py. Needs nsys 2025.3 and
# python3 (standard library only); no GPU.
#   NSYS=/path/to/nsys bash reports/hostile/nsys-deep-nesting.sh OUT_FOLDER
# Writes OUT_FOLDER/timings.csv (report, levels, wall_s, max_rss_kb, rc), env.txt and each
# command's output, gzipped. Each command gets a fresh copy of its export (nsys stats may add
# indexes) and at most 150 s; the whole run stays under 9 minutes.
set -u
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:?usage: nsys-deep-nesting.sh OUT_FOLDER}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"
nsys="${NSYS:-$(command -v nsys || true)}"
[ -x "$nsys" ] || { echo "no nsys: set NSYS"; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
{
  echo "date: $(date -u +%FT%TZ)"
  "$nsys" --version 2>&1
  echo "python3: $(python3 --version 2>&1)"
  echo "nproc: $(nproc)"; grep -m1 'model name' /proc/cpuinfo
} > "$out/env.txt" 2>&1
python3 "$root/tests/fixtures/deep-nesting/make.py" "$work" 10 1000 5000 10000 > /dev/null
python3 - "$nsys" "$work" "$out" "$root/tests/peak_rss.py" <<'PY'
import csv, importlib.util, os, shutil, subprocess, sys, time
nsys, work, out, harness = sys.argv[1:5]
spec = importlib.util.spec_from_file_location("peak_rss", harness)
peak_rss = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peak_rss)
end = time.monotonic() + 540
rows = []
for report in ("nvtx_sum", "nvtx_gpu_proj_sum"):
    for n in (10, 1000, 5000, 10000):
        name = f"{report}-{n}"
        if end - time.monotonic() < 20:
            rows.append(dict(report=report, levels=n, result="skipped (time budget)"))
            continue
        export = os.path.join(work, f"run-{name}.sqlite")
        shutil.copyfile(os.path.join(work, f"deep-{n}.sqlite"), export)
        log = os.path.join(out, f"{name}.csv")
        result = peak_rss.main(16_000, log, ["timeout", "-s", "KILL", "150", nsys, "stats", "-r", report, "-f", "csv", export])
        rows.append(dict(report=report, levels=n, result=result))
        print(name, result, flush=True)
        os.remove(export)
        subprocess.run(["gzip", "-9f", log], check=False)
with open(os.path.join(out, "timings.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["report", "levels", "result"])
    w.writeheader()
    w.writerows(rows)
PY
cat "$out/timings.csv"
