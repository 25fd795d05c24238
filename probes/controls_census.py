"""The codegen of the Liger and Inductor kernels one H200 session compiled, from their Triton caches.

    tar xzf cache.tgz   # $TRITON_CACHE_DIR and $TORCHINDUCTOR_CACHE_DIR of the session, from $OUT
    python3 probes/controls_census.py cache > reports/probes/controls-census.txt   # here

Every ``<kernel>.cubin`` under the folder, with the ``<kernel>.json`` Triton wrote beside it (warps,
shared memory) and its ``.ttgir`` (the tile it computes: Liger's ``BLOCK_SIZE``, Inductor's
``XBLOCK x R0_BLOCK``; the integer constants baked in, which for Inductor include the row
width), read with the census's cuobjdump counts. The launch grid is not in the cache: Liger
launches one program per row, Inductor one per ``XBLOCK`` rows.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

from nsys_tools.study.census import resources, sass_counts


def main(folder: Path) -> None:
    head = "kernel, tile, constants, warps, registers, shared B, ld.128, st.128, st.32, barriers, shuffles, special, SASS"
    head = head.split(", ")
    print("| " + " | ".join(head) + " |")
    print("|---|---|---|" + "---:|" * 8 + "---|---:|")
    lines = set()
    for cubin in sorted(folder.rglob("*.cubin")):
        meta = json.loads(cubin.with_suffix(".json").read_text())
        ttgir = next(cubin.parent.glob("*.ttgir")).read_text()
        tiles = sorted(set(re.findall(r"tensor<((?:\d+x)*\d+)xf32", ttgir)), key=lambda t: eval(t.replace("x", "*")))
        consts = sorted({int(c) for c in re.findall(r"arith.constant (\d+) : i32", ttgir)} - {0, 1})
        code = cubin.read_bytes()
        r, q = resources(code, meta["name"], "sm_90"), sass_counts(code, meta["name"])
        lines.add(
            f"| {meta['name']} | {tiles[-1] if tiles else ''} | {', '.join(map(str, consts))} | {meta['num_warps']} | "
            f"{r['registers']} | {meta['shared']} | {q['ld_global_128']} | {q['st_global_128']} | {q['st_global_32']} | "
            f"{q['barriers']} | {q['shuffles']} | {q['special']} | {q['instructions']} |"
        )
    print("\n".join(sorted(lines)))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
