#!/usr/bin/env bash
# Pack the analysis stack the GPU host lacks (Polars, connectorx, Dask) into parts small enough
# to travel beside the repository, one part per device call (see big-exports.md, "On the GPU host").
#
#   reports/big-exports/pack-stack.sh WHEEL_DIR... > plan.txt
#
# Run in the root of the checkout the device calls send. Wheels are unpacked into one
# site-packages tree, their shared libraries stripped of symbols, and the tree packed with xz and
# split into .stage/part-NN, each no larger than what is left of the 64 MiB a call may carry
# after the checkout itself and .device. .stage/SHA256SUMS lets
# run-device.sh check the parts it finds in /tmp. Needs unzip, strip, xz, split, sha256sum.
set -euo pipefail
WANTED=(polars polars_runtime_32 connectorx dask distributed locket partd tblib tornado zict)
LIMIT=$((64 * 1024 * 1024))
MARGIN=$((512 * 1024))
[ $# -ge 1 ] || { echo "usage: $0 WHEEL_DIR..." >&2; exit 2; }
root=$(git rev-parse --show-toplevel)
cd "$root"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/site"
for name in "${WANTED[@]}"; do
  wheel=$(find "$@" -maxdepth 1 -name "${name}-[0-9]*.whl" | sort | tail -1)
  [ -n "$wheel" ] || { echo "pack-stack: no ${name}-*.whl in $*" >&2; exit 1; }
  unzip -qo "$wheel" -d "$work/site"
  echo "$(basename "$wheel") $(stat -c %s "$wheel")" >&2
done
find "$work/site" -name '*.so*' -type f -exec strip --strip-unneeded {} + 2>/dev/null || true
tar -C "$work/site" -cf - . | xz -T0 -9 > "$work/stack.tar.xz"
# What every call sends besides a part: the tracked and untracked-not-ignored files, and .device.
tree=$({ git ls-files -co --exclude-standard -z | xargs -0 stat -c %s 2>/dev/null || true; } | awk '{s+=$1} END {print s+0}')
extra=$(du -sb .device 2>/dev/null | awk '{s+=$1} END {print s+0}')
part=$((LIMIT - tree - extra - MARGIN))
[ "$part" -gt $((1024 * 1024)) ] || { echo "pack-stack: only $part bytes left per call" >&2; exit 1; }
rm -rf .stage && mkdir .stage
split -b "$part" -d -a 2 "$work/stack.tar.xz" .stage/part-
(cd .stage && sha256sum part-* > SHA256SUMS && sha256sum < "$work/stack.tar.xz" | sed 's/-$/stack.tar.xz/' >> SHA256SUMS)
grep -qxF '/.stage/' .git/info/exclude 2>/dev/null || echo '/.stage/' >> .git/info/exclude
n=$(ls .stage/part-* | wc -l)
echo "stack: $(stat -c %s "$work/stack.tar.xz") bytes in $n parts of at most $part bytes (checkout $tree, .device $extra)" >&2
last=$(ls .stage/part-* | tail -1)
for p in .stage/part-*; do
  [ "$p" = "$last" ] && break
  echo "call: carry [\"$p\"]  command: mkdir -p /tmp/nsys-tools-stack && cp $p /tmp/nsys-tools-stack/ && ls -l /tmp/nsys-tools-stack"
done
echo "call: carry [\"$last\", \".stage/SHA256SUMS\", \".device\"]  command: source .device/nsys-env.sh; PYTHONUNBUFFERED=1 bash reports/big-exports/run-device.sh .stage"
