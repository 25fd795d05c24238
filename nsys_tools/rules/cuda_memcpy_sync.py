"""Synchronous copies, which block the host: copies launched by a ``cudaMemcpy*`` call that is
not ``Async``, except host-to-device copies of 64,000 bytes or less and copies within one
device, longest first. Twin of ``nsys analyze``'s ``cuda_memcpy_sync`` (matched to the call by
correlation id alone, as ``cuda_memcpy_async``)."""

from __future__ import annotations

from . import Finding, Rule
from . import analyze as A
from .cuda_memcpy_async import COLUMNS, copies, per_device
from .cuda_memcpy_async import NEEDS as ASYNC

RULE = Rule("cuda_memcpy_sync", "synchronous copies that block the host", twin="cuda_memcpy_sync")

OPTIONS = dict(A.COMMON)
NEEDS = {**ASYNC, "CUPTI_ACTIVITY_KIND_MEMCPY": (*ASYNC["CUPTI_ACTIVITY_KIND_MEMCPY"], "srcDeviceId", "dstDeviceId")}
ADVICE = "Use cudaMemcpyAsync on a stream (from pinned memory), so the host goes on launching while the copy runs."


def keep(m: dict[str, str]) -> str:
    """Not a host-to-device copy of 64,000 bytes or less, nor a copy within one device."""
    src, dst = m["srcDeviceId"], m["dstDeviceId"]
    return f"NOT ({m['bytes']} <= 64000 AND m.copyKind = 1) AND NOT ({src} IS NOT NULL AND {src} = {dst})"


def select(db, **options) -> list[tuple]:
    return copies(db, keep, "s.value LIKE 'cudaMemcpy%' AND s.value NOT LIKE '%Async%'", **options)


def rows(run, **options):
    return A.rows(run, RULE.name, select, COLUMNS, NEEDS, options)


def findings(run, table, **options) -> list[Finding]:
    return per_device(RULE.name, table, "synchronous copies", ADVICE)
