#!/usr/bin/env bash
# Time the ranges and kernels views on exports with LEVELS nested NVTX ranges (default 1000
# 5000 10000), built by tests/fixtures/deep-nesting/make.py from the bundled 2025.3 export.
#   bash reports/hostile/deep-nesting.sh [--tree COMMIT] [LEVELS...]
# --tree times the package as it was at COMMIT (unpacked with git archive, and run from there:
# python -m puts the working folder first on the path), on the same exports.
# Prints one line per run: view, levels, wall seconds, peak RSS (GNU time), and the table's
# line count and hash, so runs of two trees can be compared.
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
levels=("${@:-1000 5000 10000}")
levels=(${levels[@]})
echo "# $(nproc) cores, $("$python" -c 'import polars; print("polars", polars.__version__)')"
"$python" "$root/tests/fixtures/deep-nesting/make.py" "$work/exports" "${levels[@]}" > /dev/null
for view in ranges kernels; do
  for n in "${levels[@]}"; do
    (cd "$tree" && /usr/bin/time -f "%e %M" -o "$work/time" env PYTHONPATH="$tree" NSYS_TOOLS_CACHE=0 \
      "$python" -m nsys_tools report "$work/exports/deep-$n.sqlite" --view "$view" -f csv > "$work/table.csv")
    read -r wall rss < "$work/time"
    echo "$view $n levels: ${wall} s, ${rss} KB peak RSS, $(wc -l < "$work/table.csv") lines, sha256 $(sha256sum < "$work/table.csv" | cut -c1-16)"
  done
done
