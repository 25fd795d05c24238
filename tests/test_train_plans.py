"""Launch plans of the bf16 forward and the backward, and the rows rule, without a GPU."""

from __future__ import annotations

import pytest

from nsys_tools import plugin
from nsys_tools.kernels.rows import bf16_row_plan, row_plan
from nsys_tools.kernels.train_cuda import BACKWARD_MAX_N, backward_plan, forward_plan
from nsys_tools.plugin import UnsupportedShape


def test_the_ops_load_as_plugins_beside_the_fp32_forward():
    ops = plugin.load(["nsys_tools.kernels.layernorm_bf16", "nsys_tools.kernels.layernorm_bwd"]).ops
    assert {"layernorm", "layernorm_bf16", "layernorm_bwd_fp32", "layernorm_bwd_bf16"} <= set(ops)
    assert ops["layernorm_bwd_bf16"].bytes_moved((4096, 4096)) == 3 * 4096 * 4096 * 2 + 3 * 4096 * 2 + 2 * 4096 * 4
    assert ops["layernorm_bf16"].bytes_moved((4096, 768)) == (2 * 4096 * 768 + 2 * 768) * 2


def test_rows_rule_reads_bytes_per_row_not_elements():
    # the same bytes per row give the same threads, whatever the element size
    assert row_plan(4096, 1536, 2, True, 132).tpr == row_plan(4096, 768, 4, True, 132).tpr == 32
    assert row_plan(4096, 8192, 2, True, 132).tpr == row_plan(4096, 4096, 4, True, 132).tpr == 128
    # the preload follows x's bytes per SM: twice the SMs need twice the rows
    assert row_plan(4096, 768, 4, True, 132).preload and not row_plan(4096, 768, 4, True, 264).preload
    # element rows: at most 8 elements a thread, 128 to 1024 threads
    assert row_plan(1, 777, 4, False, 132).tpr == 128 and row_plan(1, 16383, 2, False, 132).tpr == 1024


def test_forward_plan_packs_eight_bf16_a_vector_and_converts_by_instruction():
    plan = forward_plan(4096, 4096, "bf16", True)
    assert plan.kernel == "ln_fwd<bf16, 128, 4, 8, 1, true, 4096, true>" and plan.grid == 4096 and plan.block == 128
    assert forward_plan(2048, 1000, "bf16", False).kernel == "ln_fwd<bf16, 64, 16, 1, 1, false, 1000, true>"
    # fp32 keeps the fp32 dispatcher's rule, without the conversions
    assert forward_plan(4096, 4096, "fp32", True).kernel == "ln_fwd<float, 128, 8, 4, 1, true, 0>"


@pytest.mark.parametrize("m", [1, 132, 133, 4096, 65536])
@pytest.mark.parametrize("n", [8, 512, 640, 1024, 1030, 2048, 4096, 4099, 5000, 12800, 16383, 16384])
def test_bf16_rule_holds_four_vectors_or_eight_to_sixteen_elements_a_thread(m, n):
    vector = n % 8 == 0
    plan = bf16_row_plan(m, n, vector, 132)
    assert 32 <= plan.tpr <= 1024 and plan.tpr & (plan.tpr - 1) == 0
    assert plan.tpr * plan.slots * plan.vec >= n
    if vector:
        assert plan.vec == 8 and plan.slots <= 4 and (plan.tpr == 32 or (plan.tpr // 2) * 4 * 8 < n)
        assert plan.preload == (plan.tpr <= 256 or m <= 132)
    else:
        assert plan.vec == 1 and not plan.preload and plan.slots <= 16
        assert plan.tpr == 32 or 8 <= n / plan.tpr < 16
    assert plan.rpb == (4 if plan.tpr == 32 and m < 2 * 32 * 132 else 1)
    assert plan.nfix == (n if n * 2 <= 8192 else 0)


@pytest.mark.parametrize("n", [1, 5, 256, 768, 777, 1000, 2048, 4100, 8192])
def test_backward_plan_covers_the_row_with_8_elements_a_thread(n):
    for vector in (True, False):
        main, cols = backward_plan(4096, n, "fp32", vector and n % 4 == 0)
        tpr, slots, vec, rpb = (int(v) for v in main.kernel.split("<")[1].rstrip(">").split(",")[1:])
        assert tpr % 32 == 0 and tpr * slots * vec >= n and slots * vec <= 8
        assert main.block == tpr * rpb <= 1024 and main.grid <= 132
        assert main.shared_bytes == (rpb * n * 4 if rpb > 1 else 0) <= 48 * 1024
        assert cols.grid * 32 >= n


def test_backward_plan_refuses_rows_it_cannot_hold():
    with pytest.raises(UnsupportedShape, match=str(BACKWARD_MAX_N)):
        backward_plan(512, BACKWARD_MAX_N + 1, "bf16", True)
    assert backward_plan(3, 768, "fp32", True)[0].grid == 1  # fewer rows than one block's groups


@pytest.mark.parametrize("n", [512, 777, 896, 3584, 4096, 4099, 16384])
def test_explicit_forward_plans_cover_the_row(n):
    vector = n % 8 == 0
    vec, most = (8, 8) if vector else (1, 16)
    for name in ("fwd_t128_r1_p1", "fwd_t256_r1_p0_f", "fwd_t512_r1_p1_c_g2", "fwd_t32_r4_p0_f_c_g16"):
        threads = int(name.split("_")[1][1:])
        if -(-n // (vec * threads)) > most:  # more slots a thread than the kernel holds
            with pytest.raises(UnsupportedShape):
                forward_plan(3000, n, "bf16", vector, named=name)
            continue
        plan = forward_plan(3000, n, "bf16", vector, named=name)
        kernel, args = plan.kernel.split("<")
        _, tpr, slots, width, rpb, preload, nfix, *cvt = (a.strip() for a in args.rstrip(">").split(","))
        assert cvt == (["true"] if "_c" in name else [])
        assert int(width) == vec and int(tpr) * int(slots) * vec >= n and int(slots) <= most
        assert preload == ("true" if "_p1" in name else "false")
        assert int(nfix) == (n if "_f" in name and n * 2 <= 8192 else 0)
        if "_g" in name:  # the row-striding kernel on per_sm blocks per SM, never more than the row groups
            per_sm = int(name.rsplit("_g", 1)[1])
            assert kernel == "ln_fwd_loop" and plan.grid == min(per_sm * 132, -(-3000 // int(rpb)))
        else:
            assert kernel == "ln_fwd" and plan.grid == -(-3000 // int(rpb))


def test_explicit_forward_plans_are_named_exactly():
    from nsys_tools.kernels.layernorm_bf16 import OP

    assert OP.impl("fwd_t256_r1_p0_g4").name == "fwd_t256_r1_p0_g4"
    bad_names = ("fwd_t48_r1_p0", "fwd_t256_r3_p0", "fwd_t256_r1_p2", "fwd_t256_r1_p0_g0", "fwd_t256_r1_p0_g17")
    for bad in (*bad_names, "fwd_t256_r1_p0_g4_c"):
        with pytest.raises(Exception, match="no implementation|not a forward plan"):
            OP.impl(bad)
    assert forward_plan(5, 4096, "bf16", True, named="fwd_t256_r1_p1_g8").grid == 5  # fewer rows than blocks


@pytest.mark.parametrize("shape", [(4096, 4096), (24576, 896), (1000, 1537), (30000, 1030), (1024, 16384), (128, 512)])
def test_exploration_candidates_are_plans_that_hold_the_row(shape):
    from nsys_tools.capture.explore import forward_candidates

    m, n = shape
    vector = n % 8 == 0
    names = forward_candidates(m, n)
    assert names and len(names) == len(set(names))
    for name in names:
        plan = forward_plan(m, n, "bf16", vector, named=name)  # raises if the plan cannot hold the row
        tpr = int(plan.kernel.split(",")[1])
        assert tpr == 32 or tpr // 2 * (8 if vector else 1) < n  # no plan leaves half its threads idle
        assert name.endswith("_c") or "_c_g" in name
        assert ("_f" in name) == (n * 2 <= 8192)
