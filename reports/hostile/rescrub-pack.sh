#!/usr/bin/env bash
# How much re-scrubbed sweep exports add to the packed repository: a scratch clone of BRANCH,
# packed (git gc, then git gc --aggressive) before and after committing `nsys-tools scrub` over
# every export under reports/sweeps that `scrub --check` flags.
#   bash reports/hostile/rescrub-pack.sh BRANCH
set -eu
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${PYTHON:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
pack() { git -C "$work/clone" count-objects -v | sed -n 's/^size-pack: //p'; }
for mode in "" --aggressive; do
  rm -rf "$work/clone"
  git clone -q --branch "$1" "$root" "$work/clone"
  git -C "$work/clone" gc -q $mode
  before="$(pack)"
  cd "$work/clone"
  flagged="$(PYTHONPATH="$root" NSYS_TOOLS_CACHE=0 "$python" -m nsys_tools scrub --check reports/sweeps 2>&1 >/dev/null \
    | sed -n 's/: would remove .*//p')"
  PYTHONPATH="$root" NSYS_TOOLS_CACHE=0 "$python" -m nsys_tools scrub $flagged > /dev/null 2>&1
  git add -A reports/sweeps && git -c user.name=x -c user.email=x@x commit -q -m rescrub
  git gc -q $mode
  after="$(pack)"
  cd "$root"
  echo "git gc $mode: $(echo "$flagged" | wc -l) exports re-scrubbed; size-pack $before KiB -> $after KiB (+$((after - before)) KiB)"
done
