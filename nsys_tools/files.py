"""Writing files so that a reader never sees half of one. Standard library only (capture side too)."""

from __future__ import annotations

from pathlib import Path


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary sibling, then rename it over ``path``."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    partial.replace(path)
