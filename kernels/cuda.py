"""Our LayerNorm kernels (``layernorm.cu``): launch plans, NVRTC compilation through CuPy, launchers.

``launch_config`` is pure Python, so the census can compile exactly what a sweep launches
without a GPU. ``make`` (the registry factory) imports CuPy and torch.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace
from functools import cache
from pathlib import Path

from nsys_tools.plugin import Buffers, UnsupportedShape

from .plans import BULK_NAME, CLUSTER_NAME, HELD_MAX_N, HELD_NAME, STAGED_NAME
from .rows import row_plan

SOURCE = Path(__file__).with_name("layernorm.cu")
NVRTC_OPTIONS = ("--std=c++17",)
# What CuPy's RawModule adds on its own when it compiles with NVRTC; the census compiles with
# these too, so that its registers match what the GPU ran (checked against traces).
CUPY_IMPLICIT_OPTIONS = ("-ftz=true",)
SM_COUNT_DEFAULT = 132  # H200; the launcher asks the device
FP32_BYTES = 4
SHARED_PER_SM = 228 * 1024  # sm_90: shared memory per SM, of which 1 KB is reserved per block


@dataclass(frozen=True)
class Held:
    """One instantiation of ``ln_held``: TPR threads per row, SLOTS vectors of VEC floats per
    thread, RPB rows per block, a cache policy, a minimum-blocks launch bound, and the row width
    compiled in (NFIX; 0: taken from the arguments)."""

    tpr: int
    slots: int
    vec: int
    rpb: int = 1
    cache: int = 0
    minb: int = 0
    nfix: int = 0

    @property
    def name(self) -> str:
        return f"ln_held<{self.tpr},{self.slots},{self.vec},{self.rpb},{self.cache},{self.minb},{self.nfix}>"

    @property
    def threads(self) -> int:
        return self.tpr * self.rpb


@dataclass(frozen=True)
class Launch:
    kernel: str  # the NVRTC name expression
    grid: int
    block: int
    shared_bytes: int = 0  # dynamic shared memory per block


PRELOAD = 8  # the cache-policy bit of ln_held that loads gamma and beta with x
STREAMING = 2  # the cache policy of streaming (evict-first) loads and stores


def held_for(n: int, vec: int, tpr: int | None = None, m: int = 0, sm_count: int = SM_COUNT_DEFAULT) -> Held:
    """The register-held instantiation for ``m`` rows of ``n`` floats read ``vec`` at a time,
    laid out by the rule of ``nsys_tools.kernels.rows``; ``tpr`` forces the threads per row (one
    row per block, default caching)."""
    if n > HELD_MAX_N:
        raise UnsupportedShape(None, f"the register-held kernels cover rows up to N = {HELD_MAX_N}, got N = {n}")
    if tpr is not None:
        return Held(tpr, math.ceil(n / vec / tpr), vec)
    plan = row_plan(m, n, FP32_BYTES, vec == 4, sm_count)
    cache = PRELOAD if plan.preload else STREAMING if plan.streaming else 0
    return Held(plan.tpr, plan.slots, plan.vec, plan.rpb, cache, nfix=plan.nfix)


def launch_config(variant: str, m: int, n: int, vec: int = 4, sm_count: int = SM_COUNT_DEFAULT, arch: int = 90) -> Launch:
    """Kernel, grid and block for ``variant`` at shape ``m x n``. ``vec`` is 4 when rows are
    16-byte aligned and N % 4 == 0, else 1; ``arch`` is the compute capability as 10 * major + minor."""
    if variant == "block_tree":
        return Launch("ln_block_tree", m, 256)
    if variant in ("warp_row", "warp_pair"):
        warps = 1 if variant == "warp_row" else 2
        rows = 128 // (32 * warps)
        return Launch(f"ln_warps<{warps},{vec}>", math.ceil(m / rows), 128)
    if variant == "ours" and n > HELD_MAX_N:
        return launch_config("block_tree", m, n, vec, sm_count)
    staged = STAGED_NAME.match(variant)
    if staged:
        _require(variant, vec)
        tpr, cache, minb = _numbers(staged)
        return Launch(f"ln_staged<{tpr},{cache},{minb}>", m, tpr, 4 * n)
    cluster = CLUSTER_NAME.match(variant)
    if cluster:
        _require(variant, vec, arch, "thread-block clusters")
        return _cluster_config(variant, m, n, *_numbers(cluster))
    bulk = BULK_NAME.match(variant)
    if bulk:
        _require(variant, vec, arch, "bulk copies")
        return _bulk_config(variant, m, n, sm_count, *_numbers(bulk))
    explicit = HELD_NAME.match(variant)
    if explicit:
        tpr, rpb, cache, minb, cap = _numbers(explicit, rpb=1, skip=("fixed",))
        if vec == 4:
            _slots(variant, n, tpr)  # a register array past 8 float4 spills
        nfix = n if explicit.group("fixed") else 0  # ``_f``: the width compiled in
        held = replace(held_for(n, vec, tpr=tpr), rpb=rpb, cache=cache, minb=minb, nfix=nfix)
        # Shared memory the kernel does not use, reserved so that at most ``cap`` blocks fit an SM
        # (the static part and the 1 KB per-block reserve fit in the 2 KB left over).
        pad = SHARED_PER_SM // cap - 2048 if cap else 0
        if held.threads > 1024:
            raise UnsupportedShape(None, f"{variant} asks for {held.threads} threads per block (at most 1024)")
    else:
        held, pad = held_for(n, vec, tpr=128 if variant == "row_held" else None, m=m, sm_count=sm_count), 0
    if variant in ("ours_nc", "ours_cs", "ours_pf"):  # the dispatcher's plan under another cache policy
        held = replace(held, cache=(held.cache & PRELOAD) | {"ours_nc": 1, "ours_cs": 2, "ours_pf": 3}[variant])
    elif variant == "ours_2rows" and held.threads <= 512:
        held = replace(held, rpb=2 * held.rpb)
    elif variant == "ours_regcap":
        held = replace(held, minb=max(1, 2048 // held.threads))
    elif variant == "ours_fixed":
        held = replace(held, nfix=n)
    grid = math.ceil(m / held.rpb)
    if variant == "ours_gridstride":
        grid = min(grid, 8 * sm_count)
    return Launch(held.name, grid, held.threads, pad)


def _numbers(match: re.Match, skip: tuple[str, ...] = (), **defaults: int) -> list[int]:
    """The numbers in a plan name, in order (groups named in ``skip`` are not numbers); an absent
    optional part is 0, or its ``defaults`` entry by group name (``rpb=1``)."""
    return [int(v) if v else defaults.get(k, 0) for k, v in match.groupdict().items() if k not in skip]


def _require(variant: str, vec: int, arch: int = 0, sm90_feature: str = "") -> None:
    """Raise for unaligned rows, or for a GPU before sm_90 when the kernel uses an sm_90 feature."""
    if sm90_feature and arch < 90:
        raise UnsupportedShape(None, f"{variant} uses {sm90_feature}, which need sm_90 or later, not sm_{arch}")
    if vec != 4:
        raise UnsupportedShape(None, f"{variant} needs 16-byte aligned rows with N % 4 == 0")


def _slots(variant: str, n: int, threads: int) -> int:
    """float4 slots per thread when ``threads`` share a row of ``n`` floats (at most 8)."""
    slots = math.ceil(n / 4 / threads)
    if slots > 8:
        raise UnsupportedShape(None, f"{variant} would hold {slots} float4 per thread at N = {n} (at most 8)", "use more threads")
    return slots


def _bulk_config(variant: str, m: int, n: int, sm_count: int, tpr: int, stages: int, bps: int, cache: int) -> Launch:
    """``ln_bulk``: ``bps`` persistent blocks per SM (capped at one per row), ``stages`` rows of
    shared memory each."""
    if cache & 8 and stages < 2:
        raise UnsupportedShape(None, f"{variant}: bulk stores free a stage one row late, so they need 2 stages or more")
    shared = stages * n * 4
    static = 8 * stages + 24 * (tpr // 32) + 1024  # mbarriers, two rounds of partials, the per-block reserve
    if bps * (shared + static) > SHARED_PER_SM:
        need = f"{bps} x {stages} rows of {n * 4} bytes of shared memory per SM"
        raise UnsupportedShape(None, f"{variant} needs {need}", "ask for fewer stages or blocks per SM")
    slots = _slots(variant, n, tpr)
    return Launch(f"ln_bulk<{tpr},{slots},{stages},{cache},{bps}>", min(m, bps * sm_count), tpr, shared)


def _cluster_config(variant: str, m: int, n: int, cs: int, tpb: int, cache: int) -> Launch:
    """``ln_cluster``: ``cs`` blocks of ``tpb`` threads per row, one cluster per row."""
    warps = cs * tpb // 32
    if warps > 32:
        raise UnsupportedShape(None, f"{variant} has {warps} warps per row; the merge takes at most 32", "use fewer threads")
    slots = _slots(variant, n, cs * tpb)
    return Launch(f"ln_cluster<{cs},{tpb},{slots},{cache}>", m * cs, tpb)


def vec_width(problem: Buffers) -> int:
    """4 when every row of x and y starts on a 16-byte boundary and N % 4 == 0, else 1."""
    m, n = problem.shape
    tensors = (problem.x, problem.y, problem.gamma, problem.beta)
    aligned = all(t.data_ptr() % 16 == 0 for t in tensors)
    strides_ok = problem.x.stride(0) % 4 == 0 and problem.y.stride(0) % 4 == 0
    return 4 if (n % 4 == 0 and aligned and strides_ok) else 1


@cache
def _module(source: Path, options: tuple[str, ...], names: tuple[str, ...]):
    import cupy as cp

    return cp.RawModule(code=source.read_text(), options=options, name_expressions=list(names))


def compile_kernels(names: list[str], source: Path = SOURCE, options: tuple[str, ...] = NVRTC_OPTIONS) -> dict[str, object]:
    """Compile ``source`` (default ``layernorm.cu``) once for all ``names`` (template
    instantiations, by name) and return their CuPy kernels. CuPy adds ``-arch=sm_XY`` for the
    device; an ``-arch`` in ``options`` (``sm_90a``) takes precedence with NVRTC."""
    module = _module(source, tuple(options), tuple(sorted(set(names))))
    return {name: module.get_function(name) for name in names}


def launcher(problem: Buffers, plan: Launch):
    """A no-argument launcher of ``plan`` on ``problem``'s buffers (arguments converted once)."""
    import cupy as cp
    import numpy as np

    m, n = problem.shape
    kernel = compile_kernels([plan.kernel])[plan.kernel]
    args = (
        cp.from_dlpack(problem.x),
        cp.from_dlpack(problem.y),
        cp.from_dlpack(problem.gamma),
        cp.from_dlpack(problem.beta),
        np.int32(m),
        np.int32(n),
        np.int64(problem.x.stride(0)),
        np.int64(problem.y.stride(0)),
        np.float32(problem.eps),
    )
    grid, block, shared = (plan.grid,), (plan.block,), plan.shared_bytes
    # Static and dynamic shared memory past 48 KB together need the opt-in. The limit belongs to
    # the compiled function, which plans of one kernel share: only ever raise it.
    if shared > kernel.max_dynamic_shared_size_bytes:
        kernel.max_dynamic_shared_size_bytes = shared

    def launch() -> None:
        kernel(grid, block, args, shared_mem=shared)

    return launch


def make(problem: Buffers, variant: str):
    """Registry factory: the launcher of ``variant`` planned for ``problem``'s shape and alignment."""
    import torch

    m, n = problem.shape
    props = torch.cuda.get_device_properties(problem.x.device)
    arch = 10 * props.major + props.minor
    return launcher(problem, launch_config(variant, m, n, vec_width(problem), props.multi_processor_count, arch))
