"""Files that ship with the package: the bundled H200 sweep and its ledger, for ``--demo``."""

from __future__ import annotations

from pathlib import Path

from . import archives
from .errors import BadExport

DEMO_SWEEP = "20261129-183449-quiet"
_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent / "reports"


def demo_capture() -> Path:
    """The bundled sweep's folder: inside the installed package, or in a source checkout's
    reports/sweeps, as a folder (the tests unpack it there) or as its archive, unpacked."""
    for candidate in (_HERE / "demo" / "sweep", _REPO / "sweeps" / DEMO_SWEEP):
        if (candidate / "manifest.json").is_file():
            return candidate
    archive = _REPO / "sweeps" / f"{DEMO_SWEEP}{archives.SUFFIX}"
    if archive.is_file():
        return archives.unpacked(archive)
    raise BadExport(_HERE / "demo", "the bundled demo capture is missing", "reinstall nsys-tools")


def demo_ledger() -> Path | None:
    """The ledger that came with the demo sweep (the sessions its bands and history come from)."""
    for candidate in (_HERE / "demo" / "ledger.sqlite", _REPO / "ledger.sqlite"):
        if candidate.is_file():
            return candidate
    return None
