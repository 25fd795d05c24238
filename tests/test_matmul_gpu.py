"""Matmul correctness on the GPU against a float64 reference, every variant of ours in both
precisions, at shapes that are not multiples of any tile (down to 1x1x1).

Run on the GPU machine with ``pytest -m gpu``; elsewhere these are skipped with the reason.
Inputs are fresh random normals for every test (never zeros); C is poisoned with NaN first, so
an element left unwritten fails. Each test checks the relative Frobenius error against the
op's tolerance and every element against ``elementwise_error``'s bound.
"""

from __future__ import annotations

import random

import pytest

from nsys_tools.kernels.matmul import ELEMENTWISE_TOLERANCE, OPS, elementwise_error
from nsys_tools.kernels.matmul_cuda import variants
from nsys_tools.plugin import Buffers, UnsupportedShape

pytestmark = pytest.mark.gpu

OP = {op.dtype: op for op in OPS}
# M x N x K: 1s; K not a multiple of the k tile; rows not 16-byte aligned (mma loads elements);
# aligned rows with partial tiles on every side (TMA fills the edges with zeros); one tile exactly.
SHAPES = [
    "1x1x1",
    "1x8x8",
    "7x9x5",
    "3x1x300",
    "129x257x72",
    "130x264x200",
    "257x136x1000",
    "300x520x8",
    "64x4096x33",
    "256x256x64",
]
# Explicit plans measured in the lineage besides the named variants (kernels/matmul_cuda.py), and
# the 192-wide plans and the TF32 plans with groups in flight (_k1, _k2) the next run chooses among.
PLANS = {
    "bf16": [
        "wgmma_n256_s4_k1",
        "wgmma_n256_s3_k1_e_p",
        "wgmma_n128_s5_k1_e_p",
        "wgmma_n128_s6_k1_p",
        "wgmma_n256_s3_e_p",
        "wgmma_n256_s3_e",
        "wgmma_n256_s4_p",
        "wgmma_n192_s4_e_p",
        "wgmma_n192_s4_k1_e_p",
        "wgmma_n192_s5_p",
        "wgmma_n192_s5_k1_p",
    ],
    "tf32": [
        "wgmma_n128_s6_p",
        "wgmma_n256_s4_k1",
        "wgmma_n256_s4_k1_p",
        "wgmma_n192_s5",
        "wgmma_n192_s5_k1",
        "wgmma_n192_s5_k1_p",
        "wgmma_n192_s5_k2",
        "wgmma_n192_s5_k2_p",
    ],
}
CASES = [(dtype, name) for dtype in OP for name in [*variants(dtype), *PLANS[dtype]]]


def _buffers(op, shape, offset: int = 0):
    """Random A and B, C poisoned; ``offset`` elements shift A off its 16-byte alignment."""
    import torch

    m, n, k = shape
    dt = op.torch_dtype()
    gen = torch.Generator(device="cuda").manual_seed(random.randrange(2**31))
    a = torch.randn(m * k + offset, device="cuda", dtype=dt, generator=gen)[offset:].view(m, k)
    b = torch.randn(k, n, device="cuda", dtype=dt, generator=gen)
    c = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
    return Buffers(shape, {"a": a, "b": b}, {"c": c}, {})


def _errors(op, impl_name, buffers):
    import torch

    launch = op.impl(impl_name).setup(buffers)
    launch()
    torch.cuda.synchronize()
    expected = op.reference(buffers)["c"]
    return op.error(buffers.c, expected), elementwise_error(buffers.c, buffers.a, buffers.b, expected)


def _assert_close(op, name, shape, errors):
    frob, elem = errors
    where = f"{name} {op.name} at {'x'.join(map(str, shape))}"
    assert frob <= op.tolerance(), f"{where}: relative error {frob:.3g}"
    assert elem <= ELEMENTWISE_TOLERANCE[op.dtype], f"{where}: elementwise error {elem:.3g}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize(("dtype", "name"), CASES)
def test_ours_matches_float64(dtype, name, shape):
    op = OP[dtype]
    dims = op.parse_shape(shape)
    buffers = _buffers(op, dims)
    if name.startswith("wgmma") and (dims[1] * buffers.a.element_size()) % 16 + (dims[2] * buffers.a.element_size()) % 16:
        with pytest.raises(UnsupportedShape, match="needs TMA"):
            op.impl(name).setup(buffers)
        return
    _assert_close(op, name, dims, _errors(op, name, buffers))


@pytest.mark.parametrize("name", ["ours", "mma", "simt"])
@pytest.mark.parametrize("dtype", list(OP))
def test_misaligned_operand(dtype, name):
    """A starting 2 or 4 bytes past a 16-byte boundary: ours falls back to element loads."""
    op = OP[dtype]
    dims = (96, 136, 200)
    buffers = _buffers(op, dims, offset=1)
    assert buffers.a.data_ptr() % 16 != 0
    _assert_close(op, name, dims, _errors(op, name, buffers))


@pytest.mark.parametrize(("dtype", "name"), [c for c in CASES if c[1] not in ("simt", "mma")])
def test_many_tiles_and_k_steps(dtype, name):
    """More tiles than SMs and more k tiles than stages: the rings of stages wrap many times, and
    persistent blocks compute several tiles each."""
    op = OP[dtype]
    dims = (1000, 2056, 2000)
    _assert_close(op, name, dims, _errors(op, name, _buffers(op, dims)))


@pytest.mark.parametrize("name", ["triton", "torch"])
@pytest.mark.parametrize("dtype", list(OP))
def test_controls_match_float64(dtype, name):
    op = OP[dtype]
    dims = (130, 264, 200)
    _assert_close(op, name, dims, _errors(op, name, _buffers(op, dims)))
