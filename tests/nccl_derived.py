"""The derived two-GPU export with NCCL kernels (``tests/fixtures/nccl-derived/make.py``), built
into a folder once for the tests that read it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from .conftest import FIXTURES


def export(into: Path) -> Path:
    path = into / "nccl-derived.sqlite"
    if not path.exists():
        spec = importlib.util.spec_from_file_location("make_nccl", FIXTURES / "nccl-derived" / "make.py")
        make = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(make)
        make.make(path)
    return path
