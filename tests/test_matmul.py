"""The matmul ops and our kernels' launch plans, without a GPU; the kernels compiled for sm_90
through NVRTC and read back with cuobjdump (the census extra)."""

from __future__ import annotations

import sys

import pytest

from nsys_tools.errors import UsageError
from nsys_tools.kernels.matmul import OPS
from nsys_tools.kernels.matmul_cuda import NAMED_PLANS, VARIANTS, Operands, plan, variants
from nsys_tools.plugin import UnsupportedShape
from nsys_tools.study import census

OP = {op.dtype: op for op in OPS}


def test_ops_one_precision_each():
    assert [op.name for op in OPS] == ["matmul_bf16", "matmul_tf32"]
    bf16, tf32 = OP["bf16"], OP["tf32"]
    assert bf16.parse_shape("2048x11008x4096") == (2048, 11008, 4096)
    assert bf16.format_shape((7, 9, 5)) == "7x9x5"
    with pytest.raises(UsageError, match="MxNxK"):
        bf16.parse_shape("4096x4096")
    assert bf16.flops((3, 5, 7)) == 2 * 3 * 5 * 7
    assert bf16.bytes_moved((3, 5, 7)) == (3 * 7 + 7 * 5 + 3 * 5) * 2  # read A and B, write C
    assert tf32.bytes_moved((3, 5, 7)) == (3 * 7 + 7 * 5 + 3 * 5) * 4
    assert (bf16.tolerance(), tf32.tolerance()) == (1e-2, 3e-3)
    assert bf16.control == "torch" and list(bf16.default_impls) == ["ours", "triton", "torch"]


def test_impls_and_explicit_plans():
    op = OP["bf16"]
    names = [i.name for i in op.impls()]
    assert names == [*VARIANTS, "triton", "torch"]
    assert "wgmma_tma_store" not in variants("tf32")  # a bf16-only kernel (register budget)
    with pytest.raises(UnsupportedShape, match="no tf32 plan"):
        plan("wgmma_tma_store", 64, 64, 64, Operands("tf32"))
    assert {i.family for i in op.impls() if i.name in VARIANTS} == {"ours"}
    assert op.impl("wgmma_n128_s5").family == "ours"
    with pytest.raises(UsageError, match="no implementation"):
        op.impl("wgmma_n96_s5")


@pytest.mark.census
def test_an_explicit_plan_compiles_to_its_kernel():
    explicit = OP["bf16"].impl("wgmma_n128_s5")
    assert explicit.compile((256, 256, 256), "sm_90").kernel.startswith("_Z13mm_wgmma_bf16ILi128ELi5E")


def test_import_needs_no_gpu_stack():
    heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "cupy", "polars")]
    import nsys_tools.kernels.matmul  # noqa: F401  (already imported: nothing heavy came with it)

    assert [m for m in sys.modules if m.split(".")[0] in ("torch", "cupy")] == [m for m in heavy if m.split(".")[0] != "polars"]


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_dispatch_prefers_wgmma_where_tma_can_read(dtype):
    big = plan("ours", 8192, 8192, 8192, Operands(dtype))
    assert big.block == 384 and big.tma
    if dtype == "bf16":  # persistent, 3 stages, C through shared memory and TMA
        assert big.kernel == "mm_wgmma_bf16<256, 3, 0, 1>" and big.grid == 132
        assert big.shared_bytes == 3 * 48 * 1024 + 64 * 1024 + 1024
    else:  # one tile per block
        assert big.kernel == "mm_wgmma_tf32<256, 4>" and big.grid == (8192 // 256) * (8192 // 128)
        assert big.shared_bytes == 4 * 48 * 1024 + 1024
    unaligned = plan("ours", 7, 9, 5, Operands(dtype, aligned=False))
    assert "mm_mma<" in unaligned.kernel and unaligned.kernel.endswith("false>") and not unaligned.tma
    ampere = plan("ours", 4096, 4096, 4096, Operands(dtype, arch=80))
    assert ampere.kernel.endswith("true>") and "mm_mma<" in ampere.kernel


def test_plans_refuse_what_they_cannot_run():
    with pytest.raises(UnsupportedShape, match="needs TMA"):
        plan("wgmma", 7, 9, 5, Operands("bf16", aligned=False))
    with pytest.raises(UnsupportedShape, match="sm_80"):
        plan("wgmma", 4096, 4096, 4096, Operands("bf16", arch=80))
    with pytest.raises(UnsupportedShape, match="shared memory"):
        plan("wgmma_n256_s5", 4096, 4096, 4096, Operands("bf16"))  # 5 x 48 KB
    with pytest.raises(UnsupportedShape, match="unknown matmul variant"):
        plan("mma_96x96_w2x2_s3", 64, 64, 64, Operands("bf16"))
    assert plan("wgmma_n128_s7", 1, 8, 8, Operands("bf16")).grid == 1


def test_named_plans_are_plans():
    for name, per_dtype in NAMED_PLANS.items():
        for dtype, explicit in per_dtype.items():
            assert plan(name, 512, 512, 512, Operands(dtype)) == plan(explicit, 512, 512, 512, Operands(dtype))
    persistent = plan("wgmma_persistent", 8192, 8192, 8192, Operands("bf16", sms=100))
    assert persistent.kernel == "mm_wgmma_bf16<256, 4, 1, 0>" and persistent.grid == 100
    assert plan("wgmma_persistent", 64, 64, 64, Operands("tf32")).grid == 1  # never more blocks than tiles


def _census(dtype: str, impls: list[str], shape: str = "4096x4096x4096"):
    op = OP[dtype]
    return {r["impl"]: r for r in census.census(op, shape, [op.impl(i) for i in impls], "sm_90").iter_rows(named=True)}


@pytest.mark.census
@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_wgmma_kernels_are_what_they_claim(dtype):
    """HGMMA fed by TMA (no global loads in the kernel), no spills, registers within the 168 a
    thread of a 384-thread block gets; the TMA-store kernel writes C without global stores."""
    rows = _census(dtype, ["wgmma", "ours"])
    base = rows["wgmma"]
    assert base["kernel"].startswith(f"_Z13mm_wgmma_{dtype}ILi256ELi4E")
    assert (base["hgmma"], base["hmma"]) == (4, 0)  # four k steps per stage
    assert base["ld_global_128"] + base["ld_global_64"] + base["ld_global_32"] == 0
    assert base["local_bytes"] == 0 and base["st_local"] == 0 and base["registers"] <= 168
    assert (base["grid"], base["block"], base["dynamic_shared_bytes"]) == (512, 384, 4 * 48 * 1024 + 1024)
    if dtype == "bf16":
        ours = rows["ours"]
        assert ours["kernel"].startswith("_Z13mm_wgmma_bf16ILi256ELi3ELi0ELi1E") and ours["grid"] == 132
        assert ours["st_global_32"] + ours["st_global_64"] + ours["st_global_128"] == 0 and ours["local_bytes"] == 0
    else:
        assert base["ld_shared"] == 16  # B^T fragments: 4 k steps x 4 registers per stage


@pytest.mark.census
@pytest.mark.slow
def test_lineage_and_triton_census():
    rows = _census("bf16", ["simt", "mma", "triton"])
    assert rows["simt"]["hmma"] == rows["simt"]["hgmma"] == 0 and rows["simt"]["local_bytes"] == 0
    assert rows["mma"]["hmma"] == 64 and rows["mma"]["hgmma"] == 0  # 2 k steps x 4 x 8 tiles of 16 x 8 per warp
    assert rows["triton"]["hgmma"] > 0 and (rows["triton"]["grid"], rows["triton"]["block"]) == (512, 256)
    text = census.markdown(census.census(OP["bf16"], "4096x4096x4096", [OP["bf16"].impl("mma")], "sm_90"))
    assert "| Tensor-core instructions HMMA / HGMMA | 64 / 0 |" in text and "4096x4096x4096 bf16" in text


def test_matmul_ops_know_the_h200_peak():
    from nsys_tools.kernels.matmul import OPS

    peaks = {op.dtype: op.peaks["NVIDIA H200"][0] for op in OPS}
    assert peaks == {"bf16": 989.5, "tf32": 494.5}
