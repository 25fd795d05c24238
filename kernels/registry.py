"""The registry of LayerNorm forward implementations: ours and the controls.

Importable with the standard library alone (CI has no GPU stack): each entry names the module
and factory that builds its launcher, and the GPU libraries are imported only by ``setup``.

Every implementation computes, for a row-major fp32 M x N tensor ``x`` (rows possibly strided),
``y = (x - mean) / sqrt(var + eps) * gamma + beta`` over the last dimension, into a
preallocated ``y``. ``setup(problem)`` allocates and converts everything up front and returns
a launch callable that takes no arguments: the timed call allocates no device memory. The
launch returns the output tensor when it makes a new one (torch), else None (it wrote ``y``).
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nsys_tools.errors import UsageError

FP32 = 4
HELD_MAX_N = 16384  # the register-held kernels keep at most 8 float4 slots x 512 threads


class UnsupportedShape(UsageError):
    """This implementation cannot run this shape (the message says which limit)."""


def layernorm_bytes(m: int, n: int) -> int:
    """The fewest bytes a LayerNorm forward moves: read x, write y, read gamma and beta."""
    return (2 * m * n + 2 * n) * FP32


def copy_bytes(m: int, n: int) -> int:
    """A device-to-device copy of x into y: read x, write y."""
    return 2 * m * n * FP32


def parse_shape(text: str) -> tuple[int, int]:
    """``"4096x768"`` -> ``(4096, 768)``; anything else is a usage error."""
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() for p in parts) or min(int(p) for p in parts) < 1:
        raise UsageError(None, f"unknown shape {text!r}", "write shapes as MxN with positive integers, e.g. 4096x768")
    return int(parts[0]), int(parts[1])


def format_shape(m: int, n: int) -> str:
    return f"{m}x{n}"


@dataclass
class Problem:
    """One set of device buffers for one shape: ``x`` (rows may be strided), ``y``, ``gamma``,
    ``beta`` as torch tensors, and ``eps``."""

    x: Any
    y: Any
    gamma: Any
    beta: Any
    eps: float = 1e-5

    @property
    def shape(self) -> tuple[int, int]:
        return tuple(self.x.shape)


@dataclass(frozen=True)
class Impl:
    name: str
    family: str  # "ours" or "control"
    summary: str
    factory: str  # "module:function"; function(problem) -> launch()
    max_n: int | None = None  # widest row supported
    strided: bool = True  # accepts rows with a stride larger than N
    moves: Callable[[int, int], int] = layernorm_bytes
    computes: str = "layernorm"  # what the output is checked against: "layernorm" or "copy"
    options: dict[str, Any] = field(default_factory=dict)  # passed to the factory

    def check(self, m: int, n: int) -> None:
        """Raise ``UnsupportedShape`` for a shape this implementation cannot run."""
        if m < 1 or n < 1:
            raise UnsupportedShape(None, f"{self.name} needs a non-empty tensor, got {m}x{n}")
        if self.max_n is not None and n > self.max_n:
            raise UnsupportedShape(
                None, f"{self.name} supports rows up to N = {self.max_n}; got N = {n} ({format_shape(m, n)})", "use ours or torch"
            )

    def setup(self, problem: Problem) -> Callable[[], None]:
        m, n = problem.shape
        self.check(m, n)
        if not self.strided and problem.x.stride(0) != n:
            raise UnsupportedShape(None, f"{self.name} needs contiguous rows")
        module, func = self.factory.split(":")
        return getattr(importlib.import_module(module), func)(problem, **self.options)


def _ours(name: str, summary: str, max_n: int | None = None) -> Impl:
    return Impl(name, "ours", summary, "kernels.cuda:make", max_n=max_n, options={"variant": name})


IMPLS: dict[str, Impl] = {
    impl.name: impl
    for impl in (
        _ours("block_tree", "block per row, shared-memory tree reduction, three scalar passes"),
        _ours("warp_row", "one warp per row, shuffle reductions, three passes"),
        _ours("warp_pair", "two warps per row, shuffle reductions, three passes"),
        _ours(
            "row_held", "block of 128 per row, row held in registers (float4 + masked tail slot), one barrier, approx rsqrt", 1024
        ),
        _ours("wide_held", "the row_held design for rows up to 16384: 128-1024 threads, up to 8 slots", HELD_MAX_N),
        _ours("ours", "dispatcher: the fastest measured variant for the shape"),
        _ours("ours_nc", "ours with read-only non-coherent loads of x (ld.global.nc)", HELD_MAX_N),
        _ours("ours_cs", "ours with streaming loads and stores (ld/st.global.cs, evict-first)", HELD_MAX_N),
        _ours("ours_pf", "ours with loads that ask the L2 for 256-byte blocks (ld.global.L2::256B)", HELD_MAX_N),
        _ours("ours_2rows", "ours with two rows per block", HELD_MAX_N),
        _ours("ours_gridstride", "ours on a grid of 8 row-blocks per SM striding over rows", HELD_MAX_N),
        _ours("ours_regcap", "ours with __launch_bounds__ asking for 2x the resident blocks (a register cap)", HELD_MAX_N),
        Impl(
            "triton",
            "control",
            "Triton LayerNorm forward after the Triton tutorial: one program per row, BLOCK = next_pow2(N)",
            "kernels.triton_ln:make",
            max_n=65536 // FP32,
        ),
        # What users run instead, from optional extras: nsys-tools[inductor] (torch alone), nsys-tools[liger].
        Impl("inductor", "control", "torch.compile of F.layer_norm into y, per shape, dynamic=False", "kernels.inductor_ln:make"),
        Impl(
            "liger", "control", "Liger-Kernel's Triton LayerNorm forward, its launch settings, into y", "kernels.liger_ln:make", max_n=65536
        ),
        Impl("torch", "control", "torch.nn.functional.layer_norm", "kernels.torch_ln:make_layer_norm"),
        Impl(
            "copy",
            "control",
            "device-to-device copy of x into y: the bandwidth floor",
            "kernels.torch_ln:make_copy",
            moves=copy_bytes,
            computes="copy",
        ),
    )
}


# An explicit register-held configuration, for trying launch plans in a sweep without editing
# the dispatcher: held_t<threads per row>[_r<rows per block>][_c<cache policy 0-5, plus 8 to load
# gamma and beta with x>][_m<min blocks>][_o<at most this many resident blocks per SM, by
# reserving shared memory>].
HELD_NAME = re.compile(
    r"^held_t(?P<tpr>32|64|128|256|512|1024)(?:_r(?P<rpb>[124]))?(?:_c(?P<cache>1[0-3]|[0-58-9]))?(?:_m(?P<minb>\d+))?"
    r"(?:_o(?P<cap>[1-8]))?$"
)
# The same for the shared-memory-staged kernel (aligned rows only): staged_t<threads>[_c<0-4>][_m<min blocks>].
STAGED_NAME = re.compile(r"^staged_t(?P<tpr>32|64|128|256|512|1024)(?:_c(?P<cache>[0-4]))?(?:_m(?P<minb>\d+))?$")
# Persistent blocks fed by bulk copies (sm_90+, aligned rows): bulk_t<threads>_s<rows in flight
# per block>_b<blocks per SM>[_c<cache bits: 2 evict-first loads and streaming stores, 4 streaming
# stores, 8 bulk stores, 10 both>].
BULK_NAME = re.compile(r"^bulk_t(?P<tpr>32|64|128|256|512|1024)_s(?P<stages>[1-8])_b(?P<bps>[1-8])(?:_c(?P<cache>0|2|4|8|10))?$")
# A row split across a thread-block cluster (sm_90+, aligned rows): cluster_c<blocks per row>_t<threads per block>[_c<cache 0-4>].
CLUSTER_NAME = re.compile(r"^cluster_c(?P<cs>[248])_t(?P<tpb>32|64|128|256|512|1024)(?:_c(?P<cache>[0-4]))?$")


PLAN_NAMES = (
    (HELD_NAME, "register-held kernel with an explicit launch plan (see kernels/cuda.py)"),
    (STAGED_NAME, "row staged in shared memory by cp.async, with an explicit launch plan"),
    (CLUSTER_NAME, "a row split across a thread-block cluster, merged through distributed shared memory"),
    (BULK_NAME, "persistent blocks, rows brought into shared memory by bulk copies (TMA), explicit plan"),
)


def get(name: str) -> Impl:
    if name in IMPLS:
        return IMPLS[name]
    for pattern, summary in PLAN_NAMES:
        if pattern.match(name):
            return _ours(name, summary, HELD_MAX_N)
    raise UsageError(None, f"unknown implementation {name!r}", f"choose from {', '.join(IMPLS)}, or held_t<threads>...")


def parse_impls(text: str) -> list[Impl]:
    """``"ours,triton"`` -> the registry entries, in order."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    if not names:
        raise UsageError(None, "no implementations given", f"choose from {', '.join(IMPLS)}")
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise UsageError(None, f"{', '.join(twice)} listed more than once", "name each implementation once")
    return [get(n) for n in names]
