"""The bf16 forward and the backward ops on the GPU: every implementation against the float64
reference, at the shapes the sweeps run and at odd ones (widths that are not multiples of 4, 8
or 32, odd row counts, strided rows). Run on the GPU machine with ``pytest -m gpu``."""

from __future__ import annotations

import importlib.util

import pytest

from nsys_tools.kernels.layernorm_bf16 import OP as FORWARD
from nsys_tools.kernels.layernorm_bwd import OPS as BACKWARD
from nsys_tools.plugin import Buffers, UnsupportedShape

pytestmark = pytest.mark.gpu

SHAPES = ["1x1", "3x5", "257x777", "4096x768", "1023x1000", "1024x2048", "4096x4096", "33x4100", "2x8192", "1024x8192", "7x16384"]
OPS = {op.name: op for op in (FORWARD, *BACKWARD)}
# Compiling controls (one Inductor build per shape) are checked at a few shapes, the rest at all.
COMPILED = {"inductor": ("257x777", "4096x768", "1024x2048")}


def _buffers(op, shape, row_pad: int = 0) -> Buffers:
    """One buffer set, rows padded by ``row_pad`` elements (strided) when asked."""
    constants, inputs, outputs = op.constants(shape, "cuda"), op.inputs(shape, "cuda"), op.outputs(shape, "cuda")
    if row_pad:
        m, n = shape
        for group in (inputs, outputs):
            for name, t in group.items():
                if t.dim() == 2:
                    wide = t.new_empty(m, n + row_pad)
                    wide[:, :n] = t
                    group[name] = wide[:, :n]
    return Buffers(shape, inputs, outputs, constants)


def _check(op, name, shape, row_pad=0):
    import torch

    from nsys_tools.capture.harness import check

    if name == "liger" and importlib.util.find_spec("liger_kernel") is None:
        pytest.skip("the liger control needs Liger-Kernel: pip install 'nsys-tools[liger]'")
    impl = op.impl(name)
    buffers = _buffers(op, shape, row_pad)
    if impl.limit and impl.limit(shape):
        with pytest.raises(UnsupportedShape):
            impl.setup(buffers)
        return
    err = check(op, impl, impl.setup(buffers), buffers, torch.cuda.synchronize)
    assert err < op.tolerance(), f"{op.name}/{name} at {op.format_shape(shape)}: relative error {err:.3g}"


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("op_name,name", [(o, i.name) for o in OPS for i in OPS[o].impls()])
def test_matches_float64_reference(op_name, name, shape):
    if shape not in COMPILED.get(name, SHAPES):
        pytest.skip(f"{name} compiles per shape: checked at {', '.join(COMPILED[name])}")
    op = OPS[op_name]
    if op in BACKWARD and shape.endswith("x1"):
        pytest.skip("one column: dx is exactly zero, so a relative error has no scale")
    _check(op, name, op.parse_shape(shape))


@pytest.mark.parametrize("row_pad", [8, 3])  # 8 keeps 16-byte rows for both precisions, 3 forces element rows
@pytest.mark.parametrize("op_name", list(OPS))
def test_ours_on_strided_rows(op_name, row_pad):
    _check(OPS[op_name], "ours", (301, 1536), row_pad)


@pytest.mark.parametrize("op_name", [op.name for op in BACKWARD])
def test_backward_partials_cover_every_row(op_name):
    """Fewer rows than blocks, and many more rows than row groups: dgamma and dbeta still sum every row."""
    for shape in ((5, 768), (20000, 256)):
        _check(OPS[op_name], "ours", shape)


# Explicit forward plans, the row-striding kernel (_g) and the conversions by instruction (_c) among
# them: fewer blocks than row groups, rows that are no multiple of the stride, one row, rows of
# elements, odd widths (the last vector or element of a row).
PLANS = [
    "fwd_t128_r1_p1",
    "fwd_t256_r1_p0_f",
    "fwd_t512_r1_p1_c_g2",
    "fwd_t32_r4_p0_f_c_g16",
    "fwd_t64_r2_p1_g8",
    "fwd_t1024_r1_p0_c_g1",
    "fwd_t128_r1_p0_f_c",
    "fwd_t256_r1_p1_c",
]


@pytest.mark.parametrize("shape", ["1x1", "3x5", "257x777", "1023x1000", "4096x4096", "20000x512", "7x16384"])
@pytest.mark.parametrize("name", PLANS)
def test_explicit_forward_plans_match_float64_reference(name, shape):
    import torch

    from nsys_tools.capture.harness import check

    dims = FORWARD.parse_shape(shape)
    impl, buffers = FORWARD.impl(name), _buffers(FORWARD, dims)
    try:
        launch = impl.setup(buffers)
    except UnsupportedShape:
        pytest.skip(f"{name} cannot hold rows of {dims[1]}")
    err = check(FORWARD, impl, launch, buffers, torch.cuda.synchronize)
    assert err < FORWARD.tolerance(), f"{name} at {shape}: relative error {err:.3g}"
