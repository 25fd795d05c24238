"""The matmul ops and our kernels' launch plans, without a GPU; the kernels compiled for sm_90
through NVRTC and read back with cuobjdump (the census extra)."""

from __future__ import annotations

import re
import sys

import pytest

from nsys_tools.errors import UsageError
from nsys_tools.kernels.census import nvrtc_cubin
from nsys_tools.kernels.matmul import OPS
from nsys_tools.kernels.matmul_cuda import (
    NAMED_PLANS,
    OPTIONS,
    SOURCE,
    VARIANTS,
    WIDE_PLANS,
    Operands,
    plan,
    variants,
    wave_efficiency,
    wave_rule,
)
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
        assert big.kernel == "mm_wgmma_tf32<256, 4, 0>" and big.grid == (8192 // 256) * (8192 // 128)
        assert big.shared_bytes == 4 * 48 * 1024 + 1024
    unaligned = plan("ours", 7, 9, 5, Operands(dtype, aligned=False))
    assert "mm_mma<" in unaligned.kernel and unaligned.kernel.endswith("false>") and not unaligned.tma
    ampere = plan("ours", 4096, 4096, 4096, Operands(dtype, arch=80))
    assert ampere.kernel.endswith("true>") and "mm_mma<" in ampere.kernel


def test_wave_efficiency_counts_the_empty_part_of_the_last_wave():
    assert wave_efficiency(288, 132) == pytest.approx(288 / 396)  # 3072 x 3072 on 128 x 256 tiles: 0.73
    assert wave_efficiency(384, 132) == pytest.approx(384 / 396)  # on 128 x 192 tiles: 0.97
    assert wave_efficiency(128, 132) == pytest.approx(128 / 132)  # one partial wave
    assert wave_efficiency(264, 132) == 1.0 and wave_efficiency(1, 132) == pytest.approx(1 / 132)


# The issue-35 matmul grid: 2048-4096 cubes, 7B/13B/70B attention and MLP products at 4096 tokens.
GRID = [
    (2048, 2048, 2048), (3072, 3072, 3072), (4096, 4096, 4096), (4096, 12288, 4096), (4096, 11008, 4096),
    (4096, 4096, 11008), (4096, 15360, 5120), (4096, 13824, 5120), (4096, 5120, 13824), (4096, 10240, 8192),
    (4096, 28672, 8192), (4096, 8192, 28672),
]  # fmt: skip


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_wave_rule_leaves_256_only_for_a_part_empty_last_wave(dtype):
    picks = {(m, n, k): plan("ours_wave", m, n, k, Operands(dtype)) for m, n, k in GRID}
    narrow = {shape for shape, p in picks.items() if "<192," in p.kernel}
    assert narrow == {(3072, 3072, 3072)}  # 288 tiles of 256 fill 0.73 of 3 waves, 384 of 192 0.97
    # ours keeps the shipped 256-wide plan everywhere until a GPU run times the rule
    for m, n, k in GRID:
        assert plan("ours", m, n, k, Operands(dtype)) == plan(WIDE_PLANS[dtype][256], m, n, k, Operands(dtype))
        if (m, n, k) not in narrow:
            assert picks[(m, n, k)] == plan("ours", m, n, k, Operands(dtype))
    assert picks[(3072, 3072, 3072)] == plan(WIDE_PLANS[dtype][192], 3072, 3072, 3072, Operands(dtype))
    # 2048 x 2048: 128 tiles of 256 in one wave; 192-wide tiles would need a second, mostly empty
    assert wave_rule(2048, 2048, dtype, 132) == 256
    # on 114 SMs 3072 x 3072 fills 0.84 of the waves either way: no reason to leave 256
    assert wave_rule(3072, 3072, dtype, 114) == 256
    # tiles past the edge count as waste: at 4096 x 3328, 576 tiles of 192 fill 0.87 of their waves
    # against 0.79 for 416 of 256, but their edge tiles run past C (bf16: 18 x 192 = 3456 columns
    # for 3328; tf32: 22 x 192 = 4224 rows for 4096)
    assert wave_rule(4096, 3328, dtype, 132) == 256


def test_192_wide_plans():
    bf16 = plan("wgmma_n192_s4_e_p", 3072, 3072, 3072, Operands("bf16"))
    assert bf16.kernel == "mm_wgmma_bf16<192, 4, 0, 1>" and bf16.grid == 132
    assert bf16.shared_bytes == 4 * (16 + 24) * 1024 + 128 * 192 * 2 + 1024  # stages, C staging, alignment slack
    assert plan("wgmma_n192_s5", 3072, 3072, 3072, Operands("bf16")).grid == 24 * 16
    tf32 = plan("wgmma_n192_s5_k1", 3072, 3072, 3072, Operands("tf32"))
    assert tf32.kernel == "mm_wgmma_tf32<192, 5, 1>" and tf32.grid == 16 * 24 and tf32.boxes == ((32, 192), (32, 32))
    assert tf32.shared_bytes == 5 * (24 + 16) * 1024 + 1024
    assert plan("wgmma_n192_s5_k2_p", 3072, 3072, 3072, Operands("tf32")).kernel == "mm_wgmma_tf32<192, 5, 2>"
    with pytest.raises(UnsupportedShape, match="_e is bf16 only"):
        plan("wgmma_n192_s4_e_p", 3072, 3072, 3072, Operands("tf32"))
    for dtype, name in (("tf32", "wgmma_n256_s4_k2"), ("bf16", "wgmma_n192_s4_k2")):
        with pytest.raises(UnsupportedShape, match="_k2 is tf32 on tiles under 256 rows only"):
            plan(name, 3072, 3072, 3072, Operands(dtype))
    with pytest.raises(UnsupportedShape, match="shared memory"):
        plan("wgmma_n192_s5_e_p", 3072, 3072, 3072, Operands("bf16"))  # 5 x 40 KB + 48 KB


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
def test_192_wide_and_in_flight_plans_census():
    """The 192-wide tiles issue m64n192 wgmmas with fewer registers than 256's; the TF32 plan
    that keeps a group in flight issues one k step per group (4 waits a stage) without spills."""
    bf16 = _census("bf16", ["wgmma_n192_s4_e_p", "ours_wave"], "3072x3072x3072")
    assert bf16["ours_wave"]["kernel"] == bf16["wgmma_n192_s4_e_p"]["kernel"]  # the rule's pick at 3072^3
    tf32 = _census("tf32", ["wgmma_n256_s4_k1", "wgmma_n192_s5_k1", "wgmma_n192_s5"], "3072x3072x3072")
    for row in [*bf16.values(), *tf32.values()]:
        assert row["hgmma"] == 4 and row["hmma"] == 0 and row["local_bytes"] == 0 and row["st_local"] == 0
        assert row["registers"] <= 168
    assert bf16["ours_wave"]["registers"] < 154  # 96 accumulators, not 128
    assert tf32["wgmma_n256_s4_k1"]["ld_shared"] == 16


def _wgmma_waits(dtype: str, name: str) -> list[int]:
    """The group counts of the kernel's wgmma waits (WARPGROUP.DEPBAR.LE gsb0, N) in its SASS. A
    wgmma that ptxas serializes (its warning C7512, which the census does not see) waits for 0
    after every HGMMA."""
    kernel = plan(name, 3072, 3072, 3072, Operands(dtype)).kernel
    _, cubin = nvrtc_cubin(SOURCE, kernel, OPTIONS, "sm_90a")
    sass = census._dump(cubin, "-sass")
    return [int(n, 16) for n in re.findall(r"WARPGROUP\.DEPBAR\.LE gsb0, (0x[0-9a-f]+)", sass)]


@pytest.mark.census
@pytest.mark.slow
def test_tf32_in_flight_plans_keep_their_groups_in_flight():
    """One wait per k step leaving KEEP groups in flight, then one for zero at the tile's end;
    the shipped TF32 loop waits for zero twice a stage."""
    assert sorted(_wgmma_waits("tf32", "wgmma_n256_s4")) == [0, 0]
    assert sorted(_wgmma_waits("tf32", "wgmma_n256_s4_k1")) == [0, 1, 1, 1, 1]
    assert sorted(_wgmma_waits("tf32", "wgmma_n192_s5_k1")) == [0, 1, 1, 1, 1]
    assert sorted(_wgmma_waits("tf32", "wgmma_n192_s5_k2")) == [0, 2, 2, 2, 2]


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
