"""Registers, spills, residency and waves of the fp32 forward's explicit plans, from their codegen
alone (sm_90, no GPU): every plan ``forward_candidates(m, n, 4)`` gives the explorer, the
dispatcher's plan (``ours``) and Triton's control, at the shapes named on the command line.

    python3 probes/fp32_plans_census.py 128x1024,1024x2048,384x12800 > reports/probes/fp32-plans-census.md

Resident blocks per SM are the fewest of: 32 blocks, 2048 threads, the 65,536 registers at 256
per warp granule, and 228 KB of shared memory at 1 KB reserved per block. Rows in flight per SM
count one row per row group of a resident block (a cluster plan's row takes its 2 or 4 blocks);
waves are the rows over rows in flight on 132 SMs. A plan spills when its SASS stores to local
memory; the last table lists those, which ``forward_candidates`` must not give.
"""

from __future__ import annotations

import math
import sys

from nsys_tools.capture.explore import forward_candidates
from nsys_tools.kernels.layernorm import OP
from nsys_tools.kernels.plans import CLUSTER_NAME, FORWARD_NAME, HELD_NAME
from nsys_tools.study.census import resources, sass_counts

SMS = 132
SHARED_PER_SM = 228 * 1024


def resident(threads: int, registers: int, shared: int) -> int:
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(max(registers, 1) * 32 / 256) * 256
    return min(32, 2048 // threads, 65536 // (warps * per_warp), SHARED_PER_SM // (shared + 1024))


def named_rows(name: str):
    found = HELD_NAME.match(name) or FORWARD_NAME.match(name)
    return found.groupdict() if found else None


def measure(name: str, m: int, n: int) -> dict | None:
    try:
        c = OP.impl(name).compile((m, n), "sm_90")
    except Exception as exc:  # a plan that cannot hold this row
        print(f"<!-- {name} at {m}x{n}: {exc} -->", file=sys.stderr)
        return None
    r, q = resources(c.cubin, c.kernel, "sm_90"), sass_counts(c.cubin, c.kernel)
    blocks = resident(c.block, r["registers"], r["shared_bytes"] + c.dynamic_shared_bytes)
    cluster = CLUSTER_NAME.match(name)
    per_row = int(cluster["cs"]) if cluster else 1
    rows_per_block = math.ceil(m / c.grid) if name == "ours" else int((named_rows(name) or {}).get("rpb") or 1)
    in_flight = max(1, blocks * rows_per_block // per_row)
    waves = math.ceil(m / (in_flight * SMS))
    spills = q["st_local"] > 0 or r["local_bytes"] > 0
    warp_instructions = q["instructions"] * math.ceil(c.block / 32) * per_row // rows_per_block
    return dict(
        name=name, threads=c.block, registers=r["registers"], spills=spills, blocks=blocks, rows=in_flight, waves=waves,
        kb=in_flight * n * 4 // 1024, sass=q["instructions"], per_row=warp_instructions, ld128=q["ld_global_128"],
    )  # fmt: skip


def main(shapes: list[str]) -> None:
    print("| shape | plan | threads | registers | spills | blocks/SM | rows in flight/SM | x KB in flight/SM | waves "
          "| ld.128 | SASS | warp instructions/row |")  # fmt: skip
    print("|---|---|" + "---:|" * 10)
    dominated = []
    for shape in shapes:
        m, n = (int(v) for v in shape.split("x"))
        ours = measure("ours", m, n)
        rows = [ours] + [measure(name, m, n) for name in forward_candidates(m, n, 4)]
        for r in filter(None, rows):
            label = r["name"]
            print(
                f"| {shape} | {label} | {r['threads']} | {r['registers']} | {'yes' if r['spills'] else ''} | {r['blocks']} | "
                f"{r['rows']} | {r['kb']} | {r['waves']} | {r['ld128']} | {r['sass']} | {r['per_row']} |"
            )
            if r["spills"]:
                dominated.append((shape, label, f"{r['registers']} registers and local memory"))
        triton = OP.impl("triton").compile((m, n), "sm_90") if n <= 16384 else None
        if triton:
            r, q = resources(triton.cubin, triton.kernel, "sm_90"), sass_counts(triton.cubin, triton.kernel)
            blocks = resident(triton.block, r["registers"], r["shared_bytes"])
            print(
                f"| {shape} | triton | {triton.block} | {r['registers']} | | {blocks} | {blocks} | {blocks * n * 4 // 1024} | "
                f"{math.ceil(m / (blocks * SMS))} | {q['ld_global_128']} | {q['instructions']} | "
                f"{q['instructions'] * triton.block // 32} |"
            )
    print("\n| shape | dominated plan | why |\n|---|---|---|")
    for shape, label, why in dominated:
        print(f"| {shape} | {label} | {why} |")


if __name__ == "__main__":
    main(sys.argv[1].split(","))
