"""Per-rank exports of one run, derived from the real two-GPU, two-process capture
(``fixtures/multi-gpu``): ``rank-1426.sqlite`` and ``rank-1427.sqlite``, each the capture with
the other process's events deleted (its API calls, NVTX ranges, kernels, copies, sets,
synchronizations), as a job that profiles each rank on its own writes them. Both keep the
capture's session, so their wall-clock spans overlap: one run.

``node=True`` makes them two nodes' exports instead: rank 1427's GPU (id 1) becomes GPU 0 of
its export, as every node of a multi-node job has a GPU 0. Nothing derived is committed.
"""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from .conftest import FIXTURES

SOURCE = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
RANKS = (1426, 1427)
TID_BITS = 24
BY_PROCESS = {
    "CUPTI_ACTIVITY_KIND_RUNTIME": "globalTid",
    "NVTX_EVENTS": "globalTid",
    "PROFILER_OVERHEAD": "globalTid",
    "CUPTI_ACTIVITY_KIND_KERNEL": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMCPY": "globalPid",
    "CUPTI_ACTIVITY_KIND_MEMSET": "globalPid",
    "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION": "globalPid",
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT": "globalPid",
}


def make(into: Path, *, node: bool = False) -> list[Path]:
    into.mkdir(parents=True, exist_ok=True)
    out = []
    for rank in RANKS:
        path = into / f"rank-{rank}.sqlite"
        shutil.copy(SOURCE, path)
        with sqlite3.connect(path) as con:
            for table, column in BY_PROCESS.items():
                con.execute(f"DELETE FROM {table} WHERE (({column} >> {TID_BITS}) % (1 << {TID_BITS})) != ?", (rank,))
            con.execute("DELETE FROM TARGET_INFO_CUDA_DEVICE WHERE pid != ?", (rank,))
            if node and rank == RANKS[1]:  # its GPU 1 is GPU 0 of another node
                con.execute("DELETE FROM TARGET_INFO_GPU WHERE id = 0")
                con.execute("UPDATE TARGET_INFO_GPU SET id = 0, cuDevice = 0, pwGpuId = 0")
                con.execute("UPDATE TARGET_INFO_CUDA_DEVICE SET gpuId = 0")
        out.append(path)
    return out
