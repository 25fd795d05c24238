"""The benchmark's exports, built from a committed fixture: the layernorm capture's CUDA and NVTX
activity replicated (``nsys_tools.run.bigexport.replicate``) to a number of kernels.

    python -m benchmarks.exports [--into DIR] [SIZE ...]     # SIZE: 0.3M, 3M, 2k, 300000

Each export is built once per size and fixture and kept in ``DIR`` (default: ``nsys-tools-bench``
in the temporary folder); nothing generated is committed."""

from __future__ import annotations

import argparse
import hashlib
import os
import sqlite3
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
SMALL = ROOT / "tests" / "fixtures" / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"  # the bundled 2-GPU capture
SUFFIXES = {"k": 1_000, "M": 1_000_000}


def default_folder() -> Path:
    return Path(os.environ.get("NSYS_TOOLS_BENCH_DIR") or Path(tempfile.gettempdir()) / "nsys-tools-bench")


def kernels(size: str) -> int:
    """``0.3M`` -> 300000, ``2k`` -> 2000, ``1200`` -> 1200."""
    scale = SUFFIXES.get(size[-1:], 1)
    return round(float(size[:-1] if scale > 1 else size) * scale)


def _kernels_in(path: Path) -> int:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as con:
        return con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]


def build(size: str, folder: Path | None = None, source: Path = FIXTURE) -> Path:
    """The export of about ``size`` kernels (a whole number of copies of ``source``), built if
    missing. Its name carries the size and the source's hash, so a changed fixture builds anew."""
    folder = folder or default_folder()
    digest = hashlib.sha256(source.read_bytes()).hexdigest()[:8]
    target = folder / f"{source.stem}-{size}-{digest}.sqlite"
    if not target.exists():
        sys.path.insert(0, str(ROOT))  # the working tree's builder
        from nsys_tools.run.bigexport import replicate

        folder.mkdir(parents=True, exist_ok=True)
        copies = max(0, round(kernels(size) / _kernels_in(source)) - 1)
        replicate(source, target, copies)
    return target


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.exports", description=__doc__.split("\n\n")[0])
    parser.add_argument("sizes", nargs="*", default=["0.3M", "3M"])
    parser.add_argument("--into", type=Path, default=None, help="where the exports are kept")
    args = parser.parse_args(argv)
    for size in args.sizes:
        path = build(size, args.into)
        print(f"{size}\t{_kernels_in(path)} kernels\t{path}")


if __name__ == "__main__":
    main()
