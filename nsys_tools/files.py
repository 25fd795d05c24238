"""Writing files so that a reader never sees half of one. Standard library only (capture side too)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def replaced_atomically(path: Path) -> Iterator[Path]:
    """A hidden sibling of ``path`` to write (same suffix, so writers that go by it still can;
    unique to this process). It is renamed over ``path`` when the block ends, and removed if the
    block raises, so ``path`` is either what it was or complete."""
    partial = path.with_name(f".{path.stem}.{os.getpid()}.partial{path.suffix}")
    try:
        yield partial
        partial.replace(path)
    finally:
        partial.unlink(missing_ok=True)


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through ``replaced_atomically``."""
    with replaced_atomically(path) as partial:
        partial.write_text(text)
