"""Correctness of every implementation on the GPU, against a float64 reference.

Run on the GPU machine with ``pytest -m gpu``; elsewhere these are skipped with the reason.
Inputs are fresh random normals for every test (never zeros); outputs are poisoned with NaN
before each run, so an unwritten element fails the check.
"""

from __future__ import annotations

import importlib.util
import random

import pytest

from nsys_tools.capture.explore import forward_candidates
from nsys_tools.kernels import liger_ln
from nsys_tools.kernels.layernorm import OP
from nsys_tools.kernels.registry import IMPLS, problem
from nsys_tools.plugin import UnsupportedShape

parse_shape = OP.parse_shape

SHAPES = ["1x1", "3x5", "4096x777", "4096x768", "8192x768", "1024x2048", "4096x4096", "2x16384", "1x65536"]
TOLERANCE = 1e-5

pytestmark = pytest.mark.gpu


def _problem(m: int, n: int, row_pad: int = 0, mean: float = 0.0):
    import torch

    gen = torch.Generator(device="cuda").manual_seed(random.randrange(2**31))
    x = torch.randn(m, n + row_pad, device="cuda", generator=gen)[:, :n]
    x.add_(mean)
    y = torch.empty(m, n + row_pad, device="cuda")[:, :n]
    gamma = torch.randn(n, device="cuda", generator=gen)
    beta = torch.randn(n, device="cuda", generator=gen)
    return problem(x, y, gamma, beta)


def _skip_without_extra(name: str) -> None:
    """The liger control comes from an optional extra: skip it, with the reason, where it is absent."""
    if name == "liger" and importlib.util.find_spec(liger_ln.MODULE) is None:
        pytest.skip("the liger control needs Liger-Kernel: pip install 'nsys-tools[liger]'")


def _run_and_check(impl, prob) -> float:
    import torch

    from nsys_tools.capture.harness import check

    _skip_without_extra(impl.name)
    return check(OP, impl, impl.setup(prob), prob, torch.cuda.synchronize)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", list(IMPLS))
def test_matches_float64_reference(name, shape):
    _skip_without_extra(name)
    impl = IMPLS[name]
    m, n = parse_shape(shape)
    if impl.limit and impl.limit((m, n)):
        with pytest.raises(UnsupportedShape, match=f"N = {n}"):
            impl.setup(_problem(m, n))
        return
    err = _run_and_check(impl, _problem(m, n))
    assert err < TOLERANCE, f"{name} at {shape}: relative error {err:.3g}"


@pytest.mark.parametrize("row_pad", [4, 3])  # 4 keeps float4 alignment, 3 forces scalar rows
@pytest.mark.parametrize("name", list(IMPLS))
def test_strided_rows(name, row_pad):
    impl = IMPLS[name]
    n = 768
    prob = _problem(257, n, row_pad=row_pad)
    assert prob.x.stride(0) == n + row_pad
    err = _run_and_check(impl, prob)
    assert err < TOLERANCE, f"{name} with row stride {n + row_pad}: relative error {err:.3g}"


@pytest.mark.parametrize("name", ["ours", "triton", "inductor", "liger"])
def test_one_kernel_writes_y_and_nothing_is_allocated(name):
    """The output policy holds for these: each call is one kernel that writes the preallocated
    y (Inductor's compiled copy_ is fused into its kernel, not a second copy kernel), and a call
    allocates no device memory."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    _skip_without_extra(name)
    prob = _problem(4096, 768)
    launch = IMPLS[name].setup(prob)
    launch()
    torch.cuda.synchronize()
    prob.y.fill_(float("nan"))
    allocated = torch.cuda.memory_stats()["allocation.all.allocated"]
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        results = [launch() for _ in range(3)]
        torch.cuda.synchronize()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == allocated
    names = [e.name() for e in prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA]
    assert len(names) == 3 and len(set(names)) == 1, names
    assert results == [None] * 3 and torch.isfinite(prob.y).all()


@pytest.mark.parametrize("name", [n for n, i in IMPLS.items() if i.family == "ours"] + ["held_t128_c8", "held_t256_c13"])
def test_offset_mean(name):
    """Rows with mean 1000 and unit spread. The fp32 mean itself is off by ~1e-5 relative to the
    spread, so the bound is 1e-4; a variance from the sum of squares (E[x^2] - mean^2, both near
    1e6 in fp32) would be off by percents and fail it."""
    from nsys_tools.kernels.registry import get

    err = _run_and_check(get(name), _problem(512, 1024, mean=1000.0))
    assert err < 1e-4


BULK_PLANS = [
    "bulk_t128_s3_b4",
    "bulk_t128_s2_b2_c2",
    "bulk_t256_s4_b2_c8",
    "bulk_t512_s3_b1_c10",
    "bulk_t32_s4_b8_c4",
    "cluster_c4_t256",
    "cluster_c2_t512_c2",
    "cluster_c8_t128",
    "cluster_c4_t32",
]


@pytest.mark.parametrize("shape", ["1x4", "3x8", "133x1028", "4096x768", "4096x4096", "2x16384"])
@pytest.mark.parametrize("name", BULK_PLANS)
def test_bulk_plans(name, shape):
    """The sm_90 kernels' plans (bulk copies, clusters): fewer rows than blocks, rows that leave
    threads or whole blocks idle, as many rows as blocks times stages, and more; plans that
    cannot hold a width say so."""
    import torch

    from nsys_tools.capture.harness import check
    from nsys_tools.kernels.registry import get

    impl = get(name)
    m, n = parse_shape(shape)
    prob = _problem(m, n)
    try:
        launch = impl.setup(prob)
    except UnsupportedShape as exc:
        assert "float4 per thread" in str(exc) or "shared memory" in str(exc)
        return
    err = check(OP, impl, launch, prob, torch.cuda.synchronize)
    assert err < TOLERANCE, f"{name} at {shape}: relative error {err:.3g}"


@pytest.mark.parametrize("name", BULK_PLANS)
def test_bulk_plans_strided_rows(name):
    from nsys_tools.kernels.registry import get

    prob = _problem(257, 768, row_pad=4)
    assert _run_and_check(get(name), prob) < TOLERANCE


@pytest.mark.parametrize("shape", ["3x5", "5x8", "4096x777", "4096x768", "257x2048", "64x16384"])
@pytest.mark.parametrize("name", ["held_t32_r4_c8", "held_t64_c10", "held_t128_c5", "held_t256_c13", "held_t512_c12"])
def test_held_cache_policies(name, shape):
    """Streaming loads with default stores (5), and gamma and beta loaded with x (+8), on the
    float4 path and the scalar one (odd widths), with rows that leave threads idle."""
    from nsys_tools.kernels.registry import get

    m, n = parse_shape(shape)
    impl = get(name)
    try:
        err = _run_and_check(impl, _problem(m, n))
    except UnsupportedShape as exc:
        assert "float4 per thread" in str(exc)
        return
    assert err < TOLERANCE
    assert _run_and_check(impl, _problem(m, n, row_pad=4)) < TOLERANCE


# The fp32 plans the explorer times (``forward_candidates(m, n, 4)``), at a narrow and a wide shape
# of each row kind: 16-byte vectors (1000, 12800: 800 and 640 threads a row) and single elements
# (2047, 9001), fewer rows than one wave of one-row blocks and more.
FP32_PLAN_SHAPES = ["333x1000", "200x2047", "384x12800", "1000x9001"]


@pytest.mark.parametrize("shape,name", [(s, n) for s in FP32_PLAN_SHAPES for n in forward_candidates(*parse_shape(s), 4)])
def test_fp32_forward_plans_match_float64_reference(shape, name):
    m, n = parse_shape(shape)
    err = _run_and_check(OP.impl(name), _problem(m, n))
    assert err < TOLERANCE, f"{name} at {shape}: relative error {err:.3g}"
