"""Our matmul kernels (``matmul.cu``): variants, launch plans, tensor maps, launchers.

``plan`` is pure Python, so the census compiles exactly what a launch would run without a GPU;
``launcher`` (and the op's factory ``make``) import CuPy and torch. Variants, in the order of
the lineage (reports/matmul-variants.md):

- ``simt``: tiled shared memory, FFMA (fp32 inputs multiply in plain fp32 here);
- ``mma``: tensor cores through ``mma.sync``, 128 x 128 tiles of four warps, a four-stage
  ``cp.async`` pipeline; ``mma_128x256``: eight warps, 128 x 256 tiles;
- ``wgmma``: sm_90a, TMA into a ring of shared-memory stages, one producer and two consumer
  warp groups; bf16 128 x 256 tiles, tf32 256 x 128 (C^T = B^T A^T); ``wgmma_n128``: 128-wide
  tiles; ``wgmma_persistent``: one block per SM looping over tiles (bf16 also keeps one wgmma
  batch in flight); ``wgmma_tma_store`` (bf16): persistent, C stored through shared memory by TMA;
- ``ours``: the dispatcher: where TMA can read the operands, the 256-wide wgmma plan measured
  fastest on the H200, else ``mma``;
- ``ours_wave``: the candidate dispatcher the next GPU run decides on: ``ours``, with the tile
  width 256 or 192 by how full the last wave of tiles is (``wave_rule``).

Explicit plans for exploring: ``wgmma_n<128|192|256>_s<stages>[_k1|_k2][_e][_p]`` (bf16: BN
columns of C per tile, tf32: that many rows; ``_k1`` one wgmma group kept in flight (tf32: one k
step per group, the next step's fragments loaded while it runs; ``_k2``, tf32 under 256 rows:
two groups); ``_e`` C stored through shared memory by TMA, bf16 only; ``_p`` a persistent grid of
one block per SM) and ``mma_<BM>x<BN>_w<warps along M>x<warps along N>_s<stages>``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from nsys_tools.plugin import UnsupportedShape

SOURCE = Path(__file__).with_name("matmul.cu")
OPTIONS = ("--std=c++17",)
SM90A_OPTIONS = (*OPTIONS, "-arch=sm_90a")  # wgmma and TMA need the arch-specific target
DTYPES = ("bf16", "tf32")
ELEMENT_BYTES = {"bf16": 2, "tf32": 4}
CXX_TYPE = {"bf16": "bf16", "tf32": "float"}
GROUP_M = 8  # tile rows per group in the grouped block order
MAX_DYNAMIC_SHARED = 227 * 1024  # sm_90: per block, opt-in
WGMMA_THREADS = 384  # one producer and two consumer warp groups

MMA_NAME = re.compile(r"^mma_(?P<bm>64|128|256)x(?P<bn>64|128|256)_w(?P<wm>[124])x(?P<wn>[1248])_s(?P<stages>[2-6])$")
WGMMA_NAME = re.compile(r"^wgmma_n(?P<n>128|192|256)_s(?P<stages>[2-7])(?P<keep>_k[12])?(?P<epi>_e)?(?P<persistent>_p)?$")

VARIANTS = {
    "simt": "tiled shared memory, 128 x 128 tiles, 8 x 8 outputs per thread, FFMA (fp32 math, not TF32)",
    "mma": "mma.sync tensor cores, ldmatrix, 4-stage cp.async pipeline, padded shared memory, 128 x 128 tiles of 4 warps",
    "mma_128x256": "the mma kernel with 8 warps on 128 x 256 tiles",
    "wgmma": "sm_90a: TMA (128-byte swizzle) into 4 stages, 1 producer and 2 consumer warp groups, wgmma, 128x256 tiles",
    "wgmma_n128": "the wgmma kernel on 128-wide tiles (bf16 128 x 128, tf32 128 x 128), 6 stages",
    "wgmma_persistent": "wgmma, one block per SM looping over tiles; bf16 keeps one wgmma batch in flight",
    "wgmma_tma_store": "bf16: persistent wgmma, 3 stages, C through stmatrix into shared memory, out by TMA during the next tile",
    "ours": "dispatcher: wgmma on 256-wide tiles, mma.sync where TMA cannot read",
    "ours_wave": "candidate dispatcher, not yet timed: ours with 256- or 192-wide tiles by how full their last wave is",
}
# Named variants as explicit plans, per precision; "ours" picks among them (see ``dispatch``).
NAMED_PLANS = {
    "mma": {"bf16": "mma_128x128_w2x2_s4", "tf32": "mma_128x128_w2x2_s4"},
    "mma_128x256": {"bf16": "mma_128x256_w2x4_s4", "tf32": "mma_128x256_w2x4_s4"},
    "wgmma": {"bf16": "wgmma_n256_s4", "tf32": "wgmma_n256_s4"},
    "wgmma_n128": {"bf16": "wgmma_n128_s6", "tf32": "wgmma_n128_s6"},
    "wgmma_persistent": {"bf16": "wgmma_n256_s4_k1_p", "tf32": "wgmma_n256_s4_p"},
    "wgmma_tma_store": {"bf16": "wgmma_n256_s3_e_p"},
}


def variants(dtype: str) -> list[str]:
    """The named variants that have a plan in ``dtype``."""
    return [v for v in VARIANTS if v not in NAMED_PLANS or dtype in NAMED_PLANS[v]]


@dataclass(frozen=True)
class Plan:
    kernel: str  # the NVRTC name expression
    grid: int
    block: int
    shared_bytes: int = 0  # dynamic shared memory
    boxes: tuple[tuple[int, int], ...] = ()  # TMA (sm_90a): (columns, rows) of the boxes of A, B (and C)
    aligned: bool = True  # 16-byte rows (cp.async / TMA)

    @property
    def tma(self) -> bool:
        return bool(self.boxes)

    @property
    def options(self) -> tuple[str, ...]:
        return SM90A_OPTIONS if self.tma else OPTIONS


@dataclass(frozen=True)
class Operands:
    """What a plan depends on besides the shape: element type, alignment, the GPU."""

    dtype: str
    aligned: bool = True  # A, B, C 16-byte aligned, rows of A and B a multiple of 16 bytes
    arch: int = 90  # compute capability, 10 * major + minor
    sms: int = 132  # multiprocessors: the size of a persistent grid

    def tma_ok(self) -> bool:
        return self.aligned and self.arch == 90


def _tiles(m: int, n: int, bm: int, bn: int) -> int:
    return math.ceil(m / bm) * math.ceil(n / bn)


def mma_plan(name: str, m: int, n: int, ops: Operands) -> Plan:
    g = {k: int(v) for k, v in MMA_NAME.match(name).groupdict().items()}
    bm, bn, wm, wn, stages = g["bm"], g["bn"], g["wm"], g["wn"], g["stages"]
    e = ELEMENT_BYTES[ops.dtype]
    if bm % (16 * wm) or bn % (16 * wn):
        raise UnsupportedShape(None, f"{name}: warp tiles must be multiples of 16 x 16")
    bk, chunk = 64 // e, 16 // e
    shared = stages * (bm * (bk + chunk) + bk * (bn + 8)) * e
    if shared > MAX_DYNAMIC_SHARED:
        raise UnsupportedShape(None, f"{name} needs {shared} bytes of shared memory per block", "use fewer stages")
    aligned = "true" if ops.aligned else "false"
    kernel = f"mm_mma<{CXX_TYPE[ops.dtype]}, {bm}, {bn}, {wm}, {wn}, {stages}, {aligned}>"
    return Plan(kernel, _tiles(m, n, bm, bn), wm * wn * 32, shared, aligned=ops.aligned)


def wgmma_plan(name: str, m: int, n: int, ops: Operands) -> Plan:
    g = WGMMA_NAME.match(name)
    wide, stages, keep, epi = int(g["n"]), int(g["stages"]), int(g["keep"][2:] if g["keep"] else 0), int(bool(g["epi"]))
    if ops.arch != 90:
        raise UnsupportedShape(None, f"{name} uses wgmma and TMA, compiled for sm_90a; this GPU is sm_{ops.arch}")
    if not ops.aligned:
        raise UnsupportedShape(
            None, f"{name} needs TMA: 16-byte aligned A and B, K and N multiples of {16 // ELEMENT_BYTES[ops.dtype]}"
        )
    if keep == 2 and (ops.dtype != "tf32" or wide == 256):
        raise UnsupportedShape(
            None,
            f"{name}: _k2 is tf32 on tiles under 256 rows only (bf16 keeps at most one batch in flight; beside "
            "128 accumulators, fragments of 3 k steps leave ptxas too few registers and it serializes the wgmmas)",
        )
    if epi and ops.dtype != "bf16":
        raise UnsupportedShape(None, f"{name}: _e is bf16 only (the TF32 kernel stores C from its registers)")
    staging = 0
    if ops.dtype == "bf16":  # 128 x wide tiles: A one box of 128 rows x 64, B wide / 64 boxes of 64 x 64, C boxes of 64 x 64
        kernel, tiles = f"mm_wgmma_bf16<{wide}, {stages}, {keep}, {epi}>", _tiles(m, n, 128, wide)
        boxes = ((64, 128), (64, 64), (64, 64))
        stage, staging = 128 * 64 * 2 + wide * 64 * 2, epi * 128 * wide * 2
    else:  # wide x 128 tiles: A one box of wide rows x 32, B 4 boxes of 32 x 32 (fp32)
        kernel, tiles, boxes = f"mm_wgmma_tf32<{wide}, {stages}, {keep}>", _tiles(m, n, wide, 128), ((32, wide), (32, 32))
        stage = wide * 32 * 4 + 128 * 32 * 4
    shared = stages * stage + staging + 1024  # + the slack to align the ring to 1024 bytes
    if shared > MAX_DYNAMIC_SHARED:
        raise UnsupportedShape(None, f"{name} needs {shared} bytes of shared memory per block", "use fewer stages")
    grid = min(tiles, ops.sms) if g["persistent"] else tiles
    return Plan(kernel, grid, WGMMA_THREADS, shared, boxes)


# The wgmma plans the rule picks from, by tile width (bf16: columns of C per tile, 128 rows;
# tf32: rows of C per tile, 128 columns). 256 is the shipped choice, the fastest plan measured on
# the H200 at every benchmark shape; 192 has the same kernel and epilogue (bf16: persistent, C
# stored through TMA; tf32: one tile per block) on tiles three quarters the size, with a stage
# more where shared memory allows.
WIDE_PLANS = {
    "bf16": {256: NAMED_PLANS["wgmma_tma_store"]["bf16"], 192: "wgmma_n192_s4_e_p"},
    "tf32": {256: NAMED_PLANS["wgmma"]["tf32"], 192: "wgmma_n192_s5"},
}
# How much more of the machine the 192-wide tiles must keep busy before the rule leaves 256: a
# 192-wide tile moves 40 KB of operands per k step for 3/4 of a 256-wide tile's 48 KB (11% more
# bytes per FLOP through shared memory and L2), and spreads its prologue and epilogue over 3/4 of
# the work.
WAVE_GAIN = 1.10


def wave_efficiency(tiles: int, sms: int) -> float:
    """Share of the SM time the tiles fill when each SM runs one tile at a time and every tile
    takes as long: tiles / (waves x sms), with waves = ceil(tiles / sms). 288 tiles on 132 SMs
    are 3 waves, the last 24/132 full: 0.73."""
    return tiles / (math.ceil(tiles / sms) * sms)


def tile_efficiency(m: int, n: int, dtype: str, width: int, sms: int) -> float:
    """``wave_efficiency`` of the ``width`` plan's tiles times the share of their outputs that
    lie inside C (tiles past an edge compute zeros at full cost)."""
    bm, bn = (128, width) if dtype == "bf16" else (width, 128)
    tiles = _tiles(m, n, bm, bn)
    return wave_efficiency(tiles, sms) * m * n / (tiles * bm * bn)


def wave_rule(m: int, n: int, dtype: str, sms: int) -> int:
    """The tile width for ``m x n`` outputs on ``sms`` SMs: 192 where its tiles keep more than
    ``WAVE_GAIN`` times the share of the machine busy that 256's do (3072 x 3072: 384 tiles in
    2.91 waves, 0.97, against 288 in 2.18, 0.73), else 256. K is the same for every tile, so it
    scales both widths alike and does not enter."""
    wide, narrow = (tile_efficiency(m, n, dtype, w, sms) for w in (256, 192))
    return 192 if narrow > WAVE_GAIN * wide else 256


def dispatch(m: int, n: int, ops: Operands, waves: bool = False) -> str:
    """The plan ``ours`` runs: where TMA can read the operands (sm_90, aligned), the 256-wide
    wgmma plan, else the mma.sync kernel (which loads unaligned rows element by element). See
    reports/matmul-variants.md. ``waves``: the width ``wave_rule`` picks (``ours_wave``), which no
    GPU has timed yet."""
    if not ops.tma_ok():
        return NAMED_PLANS["mma"][ops.dtype]
    return WIDE_PLANS[ops.dtype][wave_rule(m, n, ops.dtype, ops.sms) if waves else 256]


def plan(variant: str, m: int, n: int, k: int, ops: Operands) -> Plan:
    """Kernel, grid, block and shared memory of ``variant`` for ``m x n x k`` (``k`` does not
    change the launch)."""
    if min(m, n, k) < 1:
        raise UnsupportedShape(None, f"matmul needs M, N, K >= 1, got {m}x{n}x{k}")
    if variant in NAMED_PLANS and ops.dtype not in NAMED_PLANS[variant]:
        raise UnsupportedShape(None, f"{variant} has no {ops.dtype} plan", f"choose from {', '.join(variants(ops.dtype))}")
    if variant in ("ours", "ours_wave"):
        name = dispatch(m, n, ops, waves=variant == "ours_wave")
    else:
        name = NAMED_PLANS[variant][ops.dtype] if variant in NAMED_PLANS else variant
    if name == "simt":
        return Plan(f"mm_simt<{CXX_TYPE[ops.dtype]}, 128, 128, 8, 8, 8>", _tiles(m, n, 128, 128), 256, aligned=ops.aligned)
    if MMA_NAME.match(name):
        return mma_plan(name, m, n, ops)
    if WGMMA_NAME.match(name):
        return wgmma_plan(name, m, n, ops)
    raise UnsupportedShape(None, f"unknown matmul variant {variant!r}", f"choose from {', '.join(VARIANTS)}, mma_..., wgmma_...")


def is_variant(name: str) -> bool:
    return name in VARIANTS or bool(MMA_NAME.match(name) or WGMMA_NAME.match(name))


# -- tensor maps -------------------------------------------------------------------------------

TMA_DTYPE = {"bf16": 9, "tf32": 7}  # CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, _FLOAT32
SWIZZLE_128B, L2_PROMOTION_256B = 3, 3


def tensor_map(tensor, box_cols: int, box_rows: int, dtype: str):
    """A CUtensorMap for a row-major 2-D tensor, read in boxes of ``box_rows`` x ``box_cols``
    with the 128-byte swizzle, out-of-bounds elements filled with zeros: a one-element NumPy
    array of 128 bytes, which CuPy passes to the kernel by value."""
    import ctypes

    import numpy as np

    rows, cols = tensor.shape
    lib = _libcuda()
    raw = np.zeros(24, dtype=np.uint64)  # 128 bytes on a 64-byte boundary, as CUtensorMap asks
    start = (-raw.ctypes.data % 64) // 8
    out = raw[start : start + 16]
    dims = (ctypes.c_uint64 * 2)(cols, rows)
    strides = (ctypes.c_uint64 * 1)(cols * tensor.element_size())
    box = (ctypes.c_uint32 * 2)(box_cols, box_rows)
    steps = (ctypes.c_uint32 * 2)(1, 1)
    err = lib.cuTensorMapEncodeTiled(
        ctypes.c_void_p(out.ctypes.data), TMA_DTYPE[dtype], 2, ctypes.c_void_p(tensor.data_ptr()),
        dims, strides, box, steps, 0, SWIZZLE_128B, L2_PROMOTION_256B, 0,
    )  # fmt: skip
    if err != 0:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed with CUresult {err} for a {rows}x{cols} {dtype} tensor")
    return out.view(np.dtype((np.void, 128)))


_LIBCUDA = []


def _libcuda():
    import ctypes

    if not _LIBCUDA:
        lib = ctypes.CDLL("libcuda.so.1")
        lib.cuTensorMapEncodeTiled.restype = ctypes.c_int
        lib.cuTensorMapEncodeTiled.argtypes = [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint64),
            ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(ctypes.c_uint32), ctypes.POINTER(ctypes.c_uint32),
            ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
        ]  # fmt: skip
        _LIBCUDA.append(lib)
    return _LIBCUDA[0]


# -- launching ---------------------------------------------------------------------------------


def operands(a, b, c, dtype: str) -> Operands:
    """The ``Operands`` of torch tensors A (M x K), B (K x N), C (M x N) on their GPU."""
    import torch

    chunk = 16 // ELEMENT_BYTES[dtype]
    m, k = a.shape
    n = b.shape[1]
    contiguous = all(t.is_contiguous() for t in (a, b, c))
    if not contiguous:
        raise UnsupportedShape(None, "our matmul kernels take contiguous row-major A, B and C")
    aligned = all(t.data_ptr() % 16 == 0 for t in (a, b, c)) and k % chunk == 0 and n % chunk == 0
    props = torch.cuda.get_device_properties(a.device)
    return Operands(dtype, aligned, 10 * props.major + props.minor, props.multi_processor_count)


def launcher(a, b, c, variant: str = "ours", dtype: str | None = None):
    """A no-argument launcher computing ``c = a @ b`` with ``variant`` (arguments, tensor maps
    and compilation done here, once). It holds raw pointers: the caller keeps a, b, c alive."""
    import numpy as np

    from .cuda import compile_kernels

    dtype = dtype or ("bf16" if a.element_size() == 2 else "tf32")
    m, k = a.shape
    n = b.shape[1]
    ops = operands(a, b, c, dtype)
    p = plan(variant, m, n, k, ops)
    kernel = compile_kernels([p.kernel], SOURCE, p.options)[p.kernel]
    if p.shared_bytes > kernel.max_dynamic_shared_size_bytes:  # only ever raised (see kernels/cuda.py)
        kernel.max_dynamic_shared_size_bytes = p.shared_bytes
    dims = (np.int32(m), np.int32(n), np.int32(k), np.int32(GROUP_M))
    if p.tma:
        maps = [tensor_map(t, cols, rows, dtype) for t, (cols, rows) in zip((a, b, c), p.boxes, strict=False)]
        args = (*maps, np.uint64(c.data_ptr()), *dims)
    else:
        pairs = np.int32(n % 2 == 0 and c.data_ptr() % (2 * c.element_size()) == 0)
        args = (np.uint64(a.data_ptr()), np.uint64(b.data_ptr()), np.uint64(c.data_ptr()), *dims, pairs)
    grid, block, shared = (p.grid,), (p.block,), p.shared_bytes

    def launch() -> None:
        kernel(grid, block, args, shared_mem=shared)

    return launch


def make(buffers, variant: str = "ours", dtype: str = "bf16"):
    """Op factory: ``buffers.c = buffers.a @ buffers.b`` with ``variant``."""
    return launcher(buffers.a, buffers.b, buffers.c, variant, dtype)


def compile_for_census(variant: str, dtype: str, shape: tuple[int, int, int], arch: str):
    """``Impl.compile`` hook: the cubin ``variant`` would run at ``shape`` on ``arch`` (aligned
    operands), compiled without a GPU."""
    from nsys_tools.plugin import Cubin, arch_number

    from .census import nvrtc_cubin

    m, n, k = shape
    chunk = 16 // ELEMENT_BYTES[dtype]
    p = plan(variant, m, n, k, Operands(dtype, k % chunk == 0 and n % chunk == 0, arch_number(arch)))
    lowered, cubin = nvrtc_cubin(SOURCE, p.kernel, OPTIONS, "sm_90a" if p.tma else arch)
    return Cubin(lowered, cubin, p.grid, p.block, p.shared_bytes)
