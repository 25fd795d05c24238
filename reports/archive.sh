#!/bin/bash
# Packs folders of reports/ into one archive each, <folder>.tar.xz beside it, the way every archive
# here was made: hidden entries (capture scratch: logs, .nsys-rep files) left out, every export
# scrubbed with the current `nsys-tools scrub` and then checked with `scrub --check`, members in
# name order with owner 0 and time 0, compressed with xz -6 on one thread (the same bytes from the
# same files). The folder itself is not changed. Usage: reports/archive.sh FOLDER...
set -euo pipefail
NSYS_TOOLS=${NSYS_TOOLS:-nsys-tools}
for folder in "$@"; do
    folder=${folder%/}
    id=$(basename "$folder")
    work=$(mktemp -d)
    tar -C "$(dirname "$folder")" --exclude='.*' -cf - "$id" | tar -C "$work" -xf -
    if find "$work/$id" -name '*.sqlite' | grep -q .; then
        $NSYS_TOOLS scrub "$work/$id"
        $NSYS_TOOLS scrub --check "$work/$id"
    fi
    tar -C "$work" --sort=name --owner=0 --group=0 --numeric-owner --mtime=@0 --format=gnu -cf - "$id" \
        | xz -6 -T1 > "$folder.tar.xz"
    rm -rf "$work"
    echo "$folder.tar.xz: $(stat -c %s "$folder.tar.xz") bytes"
done
