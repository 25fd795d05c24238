"""Files that ship with the package: the bundled H200 sweep and its ledger, for ``--demo``."""

from __future__ import annotations

from pathlib import Path

from .errors import BadExport

DEMO_SWEEP = "20261129-183449-quiet"
_HERE = Path(__file__).resolve().parent
_REPO = _HERE.parent / "reports"


def demo_capture() -> Path:
    """The bundled sweep: inside the installed package, or in a source checkout's reports/."""
    for candidate in (_HERE / "demo" / "sweep", _REPO / "sweeps" / DEMO_SWEEP):
        if (candidate / "manifest.json").is_file():
            return candidate
    raise BadExport(_HERE / "demo", "the bundled demo capture is missing", "reinstall nsys-tools")


def demo_ledger() -> Path | None:
    """The ledger that came with the demo sweep (the sessions its bands and history come from)."""
    for candidate in (_HERE / "demo" / "ledger.sqlite", _REPO / "ledger.sqlite"):
        if candidate.is_file():
            return candidate
    return None
