"""Build the nested-ranges export of the bounds check: the real 2025.3 LayerNorm export's
activity replicated to 20,193 kernels (``run/bigexport.replicate``: 52 shifted copies), then
4,000 push/pop ranges nested one inside the other around all of it
(``fixtures/deep-nesting/make.py``). Every kernel then lies in 4,000+ ranges.

    python -m tests.nested_ranges OUT_FOLDER [LEVELS [COPIES]]   (prints the export's path)
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from nsys_tools.run.bigexport import replicate

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "fixtures" / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
_spec = importlib.util.spec_from_file_location("deep_nesting", HERE / "fixtures" / "deep-nesting" / "make.py")
make = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make)


def build(folder: Path, levels: int = 4000, copies: int = 52) -> Path:
    """``folder/deep-<levels>.sqlite``: ``copies`` + 1 times the source's activity, in ``levels`` nested ranges."""
    folder.mkdir(parents=True, exist_ok=True)
    wide = folder / f"wide-{copies}.sqlite"
    replicate(SOURCE, wide, copies)
    try:
        return make.deep(folder, levels, source=wide)
    finally:
        wide.unlink()


if __name__ == "__main__":
    args = sys.argv[1:]
    print(build(Path(args[0]), *(int(a) for a in args[1:3])))
