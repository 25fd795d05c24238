"""Typed errors. Each names the file, what is wrong, and a hint; the CLI prints them on one line."""

from __future__ import annotations

from pathlib import Path


class NsysToolsError(Exception):
    """Base class: ``str(err)`` is the one line the CLI prints after ``Error:``."""

    def __init__(self, path: str | Path | None, problem: str, hint: str = ""):
        self.path = None if path is None else Path(path)
        self.problem = problem
        self.hint = hint
        where = f"{self.path}: " if self.path is not None else ""
        tail = f"; {hint}" if hint else ""
        super().__init__(f"{where}{problem}{tail}")


class BadExport(NsysToolsError):
    """The file is missing, not SQLite, truncated, or not an Nsight Systems export."""


class MissingTable(BadExport):
    """The export lacks a table this analysis needs."""


class MissingColumn(BadExport):
    """A table the analysis reads lacks a column it needs."""


class NsysNotFound(NsysToolsError):
    """No usable ``nsys`` executable."""


class CaptureError(NsysToolsError):
    """A capture step failed (profiling, export, harness)."""


class OutputError(NsysToolsError):
    """An output cannot be written where it was asked for (an input, a folder, a device, no space)."""


class UsageError(NsysToolsError):
    """Arguments that parse but make no sense together (unknown shape, impl, ...)."""


class PluginError(NsysToolsError):
    """An op or implementation plugin that cannot be loaded or breaks the interface."""


class ToolMissing(NsysToolsError):
    """A compiler or binary tool a step needs (NVRTC, Triton, cuobjdump) is not installed."""
