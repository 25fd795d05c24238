"""The LayerNorm plugin: its registry, the bytes formulas and shape validation (no GPU needed)."""

from __future__ import annotations

import pytest

from nsys_tools.capture.explore import around_candidates
from nsys_tools.errors import UsageError
from nsys_tools.kernels.cuda import Held, Launch, held_for, launch_config
from nsys_tools.kernels.layernorm import OP
from nsys_tools.kernels.registry import IMPLS, UnsupportedShape, copy_bytes, get, layernorm_bytes
from nsys_tools.plugin import Registry

parse_shape = OP.parse_shape


def test_layernorm_is_an_installed_plugin():
    """The built-in op loads like any other: through the entry-point group."""
    registry = Registry()
    assert registry.op("layernorm") is not None and registry.op("layernorm").control == "triton"
    op = registry.op("layernorm")
    assert [i.name for i in registry.impls(op)] == ["ours", "triton", "torch", "copy"]  # the op's default set
    assert registry.impl(op, "held_t128_r2").family == "ours"  # explicit plans still resolve


def test_registry_has_the_lineage_and_the_controls():
    ours = {n for n, i in IMPLS.items() if i.family == "ours"}
    controls = {n for n, i in IMPLS.items() if i.family == "control"}
    assert {"block_tree", "warp_row", "warp_pair", "row_held", "wide_held", "ours"} <= ours
    assert controls == {"triton", "inductor", "liger", "torch", "copy"}


def test_bytes_formulas():
    # 4096x768 fp32: read x and write y (2 x 12.58 MB), read gamma and beta (2 x 3 KB).
    assert layernorm_bytes(4096, 768) == 25_171_968
    assert copy_bytes(4096, 768) == 25_165_824
    assert OP.work(IMPLS["copy"], (4096, 4096))["bytes"] == 134_217_728
    assert OP.work(IMPLS["ours"], (1, 1)) == {"bytes": 16, "flops": 7}
    assert IMPLS["torch"].allocates and not any(i.allocates for n, i in IMPLS.items() if n != "torch")


@pytest.mark.parametrize("text, expected", [("4096x768", (4096, 768)), ("1X65536", (1, 65536)), (" 3x5", (3, 5))])
def test_parse_shape(text, expected):
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text", ["4096", "0x5", "axb", "4096x768x2", "-1x4", ""])
def test_parse_shape_rejects(text):
    with pytest.raises(UsageError, match="unknown layernorm shape"):
        parse_shape(text)


def test_unknown_impl_names_the_choices():
    with pytest.raises(UsageError, match="choose from block_tree"):
        get("cutlass")
    registry = Registry()
    assert [i.name for i in registry.impls(OP, "ours, triton")] == ["ours", "triton"]
    with pytest.raises(UsageError, match="ours listed more than once"):
        registry.impls(OP, "ours,triton,ours")


@pytest.mark.parametrize("name, n", [("triton", 16385), ("row_held", 1025), ("wide_held", 16385)])
def test_unsupported_widths_are_clear(name, n):
    with pytest.raises(UnsupportedShape, match=f"N = {n}"):
        IMPLS[name].check((4, n))
    IMPLS[name].check((4, n - 1))


def test_ours_covers_every_width():
    for n in (1, 5, 777, 16384, 16385, 65536, 1 << 20):
        IMPLS["ours"].check((1, n))


def test_held_plan_keeps_the_row_in_registers():
    assert held_for(768, 4, tpr=128) == Held(128, 2, 4)  # the seed's #52 layout: a quad plus a masked tail slot
    # one warp per row, four rows per block; up to 2048 floats the width is compiled in
    assert held_for(768, 4, m=2048) == Held(32, 6, 4, rpb=4, nfix=768)
    # from 12 MiB on, gamma and beta are loaded with x (cache bit 8), one warp per block
    assert held_for(768, 4, m=4096) == Held(32, 6, 4, rpb=1, cache=8, nfix=768)
    # many small rows (two waves of single-warp blocks, 64 x 132): one warp per block, no preload
    assert held_for(256, 4, m=8448) == Held(32, 2, 4, rpb=1, nfix=256)
    assert held_for(256, 4, m=8447).rpb == 4 and held_for(256, 4, m=8448, sm_count=264).rpb == 4
    # with the preload and more than one warp per row, N stays an argument (measured slower compiled in)
    assert held_for(1024, 4, m=8192) == Held(64, 4, 4, cache=8)
    assert held_for(2048, 4, m=1024).nfix == 2048 and held_for(2048, 4, m=4096).nfix == 0
    assert held_for(4096, 4, m=512).nfix == 0
    assert held_for(2048, 4, m=1024).cache == 0 and held_for(2048, 4, m=4096).cache == 8
    assert held_for(16384, 4, m=4096).cache == 2  # no registers to spare for the preload
    assert held_for(2048, 4, m=8192).rpb == 1 and held_for(768, 1, m=8192).tpr == 128
    for n in (1, 768, 777, 1024, 2048, 4096, 8192, 16384):
        for vec in (1, 4):
            h = held_for(n, vec)
            assert h.tpr * h.slots * vec >= n > h.tpr * (h.slots - 1) * vec  # covers the row, no idle slot
            assert h.slots <= (8 if vec == 4 else 16) and h.threads <= 1024


def test_launch_configs():
    assert launch_config("block_tree", 4096, 768).grid == 4096
    assert launch_config("warp_row", 4096, 768).grid == 1024
    assert launch_config("ours", 1, 65536).kernel == "ln_block_tree"
    assert launch_config("ours", 2048, 768) == Launch("ln_held<32,6,4,4,0,0,768>", 512, 128)
    assert launch_config("ours", 8192, 768) == Launch("ln_held<32,6,4,1,8,0,768>", 8192, 32)
    assert launch_config("ours_2rows", 2048, 768).grid == 256
    assert launch_config("ours", 4096, 4096) == Launch("ln_held<128,8,4,1,8,0,0>", 4096, 128)
    assert launch_config("ours_nc", 4096, 4096) == Launch("ln_held<128,8,4,1,9,0,0>", 4096, 128)  # keeps the preload
    assert launch_config("ours_2rows", 4096, 4096) == Launch("ln_held<128,8,4,2,8,0,0>", 2048, 256)
    # The width compiled in: the dispatcher's plan, N as a template argument.
    assert launch_config("ours_fixed", 4096, 4096) == Launch("ln_held<128,8,4,1,8,0,4096>", 4096, 128)
    assert launch_config("held_t32_r4_c0_f", 2048, 768) == launch_config("ours", 2048, 768)
    assert launch_config("ours_fixed", 16384, 500, vec=4).kernel.endswith(",500>")
    assert launch_config("ours_gridstride", 4096, 4096, sm_count=132).grid == 8 * 132
    assert launch_config("ours_cs", 2048, 768).kernel.endswith(",2,0,768>")
    assert launch_config("ours", 1024, 8192) == Launch("ln_held<256,8,4,1,8,0,0>", 1024, 256)
    assert launch_config("ours", 1024, 16384) == Launch("ln_held<512,8,4,1,2,0,0>", 1024, 512)
    assert launch_config("ours", 1024, 16383, vec=1).kernel.startswith("ln_held<1024,")
    assert launch_config("bulk_t512_s3_b1", 1024, 16384, sm_count=132) == Launch("ln_bulk<512,8,3,0,1>", 132, 512, 3 * 65536)
    with pytest.raises(UnsupportedShape, match="sm_90"):
        launch_config("bulk_t128_s3_b4", 4096, 4096, arch=89)


def test_explicit_held_plans():
    impl = get("held_t128_r2_c2")
    assert impl.family == "ours" and impl.limit((1, 16384)) is None and "16384" in impl.limit((1, 16385))
    assert launch_config("held_t128_r2_c2", 4096, 4096) == Launch("ln_held<128,8,4,2,2,0,0>", 2048, 256)
    assert launch_config("held_t1024", 4096, 4096) == Launch("ln_held<1024,1,4,1,0,0,0>", 4096, 1024)
    with pytest.raises(UsageError):
        get("held_t48")
    # at most 3 blocks per SM: 3 x (pad + 2 KB) fits 228 KB, a fourth block does not
    pad = launch_config("held_t256_c2_o3", 4096, 4096).shared_bytes
    assert 3 * (pad + 2048) <= 228 * 1024 < 4 * (pad + 1024)
    assert launch_config("staged_t128_m12", 4096, 4096) == Launch("ln_staged<128,0,12>", 4096, 128, 16384)
    with pytest.raises(UnsupportedShape, match="aligned"):
        launch_config("staged_t128", 4096, 777, vec=1)


def test_cache_policies_and_preloaded_gamma_beta():
    # policy in the low three bits (5: streaming loads, default stores), +8: gamma and beta with x
    assert launch_config("held_t256_c13", 4096, 4096) == Launch("ln_held<256,4,4,1,13,0,0>", 4096, 256)
    assert launch_config("held_t32_r4_c8", 4096, 768).kernel == "ln_held<32,6,4,4,8,0,0>"
    for bad in ("held_t256_c6", "held_t256_c7", "held_t256_c14", "held_t256_c16"):
        with pytest.raises(UsageError):
            get(bad)
    with pytest.raises(UnsupportedShape, match="32 float4 per thread"):
        launch_config("held_t32", 4096, 4096)  # a 32-slot register array would spill


@pytest.mark.parametrize("shape", ["4096x768", "8192x768", "1024x2048", "4096x4096", "1024x8192", "512x16384", "16384x512"])
def test_plans_around_the_dispatcher(shape):
    m, n = parse_shape(shape)
    names = around_candidates(m, n)
    ours = launch_config("ours", m, n)
    launches = [launch_config(name, m, n) for name in names]  # every name is a valid plan for this shape
    assert ours in launches  # the dispatcher's own plan is among them, as a noise pair for `ours`
    assert len(set(launches)) == len(names)  # no plan named twice
    assert {lc.kernel.split(",")[4] for lc in launches} >= {"0", "2", "5", "8", "10"}


def test_bulk_plans_fit_shared_memory_and_registers():
    assert get("bulk_t128_s4_b3").family == "ours"
    # 3 blocks per SM on 132 SMs, four 16 KB rows in flight per block
    assert launch_config("bulk_t128_s4_b3", 4096, 4096, sm_count=132) == Launch("ln_bulk<128,8,4,0,3>", 396, 128, 65536)
    assert launch_config("bulk_t256_s2_b4_c2", 100, 4096).grid == 100  # never more blocks than rows
    with pytest.raises(UnsupportedShape, match="shared memory"):
        launch_config("bulk_t256_s8_b2", 4096, 4096)  # 2 x 8 x 16 KB > 228 KB
    with pytest.raises(UnsupportedShape, match="16 float4"):
        launch_config("bulk_t128_s2_b1", 4096, 8192)
    with pytest.raises(UnsupportedShape, match="aligned"):
        launch_config("bulk_t128_s2_b1", 4096, 777, vec=1)
    with pytest.raises(UnsupportedShape, match="2 stages"):
        launch_config("bulk_t128_s1_b4_c8", 4096, 4096)
    assert launch_config("bulk_t128_s3_b4_c10", 4096, 4096).kernel == "ln_bulk<128,8,3,10,4>"
    for bad in ("bulk_t128_s9_b1", "bulk_t128_s2_b2_c1"):
        with pytest.raises(UsageError):
            get(bad)


def test_cluster_plans():
    # four blocks of 256 threads per row, one float4 each at N = 4096; a grid of one cluster per row
    assert launch_config("cluster_c4_t256", 4096, 4096) == Launch("ln_cluster<4,256,1,0>", 16384, 256)
    assert launch_config("cluster_c2_t128_c2", 10, 4096).kernel == "ln_cluster<2,128,4,2>"
    with pytest.raises(UnsupportedShape, match="64 warps"):
        launch_config("cluster_c8_t256", 4096, 4096)
    with pytest.raises(UnsupportedShape, match="sm_90"):
        launch_config("cluster_c4_t256", 4096, 4096, arch=80)
    with pytest.raises(UnsupportedShape, match="16 float4"):
        launch_config("cluster_c2_t32", 4, 4096)


def test_explore_summary_of_an_h200_session():
    """``nsys_tools.capture.explore``'s closing table, rebuilt from the raw rows an H200 session wrote: the
    same medians and ratios that session printed (explore-g0.log)."""
    import json
    from pathlib import Path

    from nsys_tools.capture.explore import summary

    folder = Path(__file__).resolve().parents[1] / "reports" / "explore" / "controls-dispatch"
    table = summary(json.loads((folder / "explore-g0.json").read_text()))
    printed = (folder / "explore-g0.log").read_text()
    lines = [line for line in table.splitlines() if line.startswith("| 4096x4096")]
    assert lines == [
        "| 4096x4096 | rotate | 33.20 | 33.23 held_t128_c8 | 40.21 | 34.35 | 33.63 | 52.00 | 32.45 | 0.987 | 1.023 |",
        "| 4096x4096 | reuse | 33.34 | 33.38 held_t128_c8 | 40.06 | 34.30 | 33.62 | 51.82 | 32.83 | 0.992 | 1.016 |",
    ]
    assert all(line in printed for line in table.splitlines())
