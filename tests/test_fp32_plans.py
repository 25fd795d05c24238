"""The fp32 forward's explicit plans for the explorer (``forward_candidates(m, n, 4)``), without a GPU:
what they are, that each resolves to the kernel its name says, and that the explorer's command
line times them."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from nsys_tools.capture import explore
from nsys_tools.capture.explore import forward_candidates, fp32_candidates, op_summary
from nsys_tools.kernels.cuda import launch_config
from nsys_tools.kernels.layernorm import OP
from nsys_tools.kernels.plans import CLUSTER_NAME, FORWARD_NAME, HELD_NAME, STAGED_NAME
from nsys_tools.kernels.train_cuda import forward_plan

SCRIPT = Path(__file__).resolve().parents[1] / "reports" / "kernels-35.sh"


def script_list(name: str) -> list[str]:
    """A comma-separated variable of ``reports/kernels-35.sh`` (``NAME=...``, continued over lines)."""
    found = re.search(rf"^{name}=((?:[^\n]*\\\n)*[^\n]*)$", SCRIPT.read_text(), re.M)
    return found[1].replace("\\\n", "").split(",")


def kernel_of(name: str, m: int, n: int) -> str:
    """The kernel instantiation a plan name launches at ``m x n`` (contiguous, aligned rows)."""
    if FORWARD_NAME.match(name):
        return forward_plan(m, n, "fp32", n % 4 == 0, named=name).kernel
    return launch_config(name, m, n, 4 if n % 4 == 0 else 1).kernel


GRID = script_list("FP32")
CENSUS = Path(__file__).resolve().parents[1] / "reports" / "probes" / "fp32-plans-census.md"


def test_the_script_grid_is_the_issue_regimes():
    shapes = [tuple(map(int, s.split("x"))) for s in GRID]
    small = [(m, n) for m, n in shapes if m <= 1024 and n <= 2048]
    wide = [(m, n) for m, n in shapes if n >= 8192]
    assert len(shapes) == len(set(shapes)) >= 24 and len(small) + len(wide) == len(shapes)
    assert (128, 1024) in small and (384, 12800) in wide and len(small) >= 10 and len(wide) >= 10
    assert any(n % 4 for _, n in small) and any(n % 4 for _, n in wide)


def test_the_exploration_leaves_out_what_the_census_finds_spilling():
    """``FP32_DROP`` is the census's table of spilling plans, each one a plan the explorer would
    otherwise time; the census covers every plan of the grid."""
    table = CENSUS.read_text().split("| shape | dominated plan | why |")
    spilling = [f"{row.split('|')[1].strip()}:{row.split('|')[2].strip()}" for row in table[1].splitlines()[2:] if row]
    assert spilling and script_list("FP32_DROP") == spilling
    for entry in spilling:
        shape, plan = entry.split(":")
        assert plan in forward_candidates(*map(int, shape.split("x")), 4)
    censused = {tuple(row.split("|")[1:3]) for row in table[0].splitlines()[2:]}
    for shape in GRID:
        for plan in ["ours", *forward_candidates(*map(int, shape.split("x")), 4)]:
            assert (f" {shape} ", f" {plan} ") in censused


def test_the_exploration_is_bounded():
    """Under 800 plans over the grid: at the bf16 exploration's pace (600 plans over 32 shapes in
    60-90 s on the H100) about two minutes, with the controls' compilation on top."""
    counts = {s: len(forward_candidates(*map(int, s.split("x")), 4)) for s in GRID}
    assert sum(counts.values()) < 800 and max(counts.values()) <= 48


@pytest.mark.parametrize("shape", GRID)
def test_every_candidate_resolves_to_the_kernel_its_name_says(shape):
    m, n = map(int, shape.split("x"))
    names = forward_candidates(m, n, 4)
    assert len(names) == len(set(names)) and bool(names) == (n <= 16384)  # past 16384 ours is block_tree
    vec = 4 if n % 4 == 0 else 1
    for name in names:
        impl = OP.impl(name)
        assert impl.name == name and impl.family == "ours" and impl.limit((m, n)) is None
        kernel = kernel_of(name, m, n)  # raises if the plan cannot hold the row
        held, fwd = HELD_NAME.match(name), FORWARD_NAME.match(name)
        if held or fwd:
            found = held or fwd
            tpr, rpb = int(found["tpr"]), int(found["rpb"] or 1)
            slots = math.ceil(n / vec / tpr)
            assert slots <= (8 if vec == 4 else 16) and (tpr == 32 or tpr // 2 < math.ceil(n / vec))
            if held:
                assert kernel.startswith(f"ln_held<{tpr},{slots},{vec},{rpb},")
            else:
                assert kernel.startswith(f"ln_fwd{'_loop' if fwd['per_sm'] else ''}<float, {tpr}, {slots}, {vec}, {rpb}, ")
            assert (found["fixed"] is not None) == (n * 4 <= 8192)  # the width compiled in, narrow rows only
        else:
            assert vec == 4 and n * 4 > 8192 and (STAGED_NAME.match(name) or CLUSTER_NAME.match(name))


def test_narrow_rows_specialize_as_inductor_does_and_wide_rows_fill_the_sm():
    small = fp32_candidates(128, 1024)
    # Inductor's persistent reduction at 128x1024: one row a program, 4 floats a thread (256
    # threads), gamma and beta loaded with x, N a constant, no row loop
    assert {"held_t256_r1_c8_f", "fwd_t256_r1_p1_f", "fwd_t32_r4_p0_f", "held_t64_r1_c0_f"} <= set(small)
    assert not any("_m" in s or "_g" in s or s.startswith(("staged", "cluster")) for s in small)
    assert not any(s.startswith("fwd_") for s in fp32_candidates(4096, 1024))  # more than one wave: the shipped kernel
    wide = fp32_candidates(384, 12800)
    # 3200 vectors: 800 threads of 4 and 640 of 5 leave no slot masked, beside 512 and 1024
    assert {"held_t800_c2", "held_t640_c0", "held_t512_c2", "held_t1024_c2"} <= set(wide)
    assert {"staged_t256_c2", "cluster_c2_t512", "fwd_t512_r1_p0_g1"} <= set(wide)
    assert "cluster_c2_t512" not in fp32_candidates(4096, 12800)  # clusters only at one wave or less
    # element rows (N % 4 != 0) take neither staged nor cluster plans (both need 16-byte rows)
    assert not any(s.startswith(("staged", "cluster")) for s in fp32_candidates(1000, 9001))


def test_threads_per_row_are_whole_warps_that_leave_no_warp_idle():
    assert explore._threads(3200, 8) == [416, 480, 512, 544, 640, 800, 1024]
    assert explore._threads(4096, 8) == [512, 1024]  # powers of two divide it: nothing else
    assert explore._threads(256, 8) == [32, 64, 128, 256]
    for units in (97, 500, 777, 2047, 3200, 4096):
        for tpr in explore._threads(units, 8):
            assert tpr % 32 == 0 and tpr <= 1024 and math.ceil(units / tpr) <= 8 and (tpr == 32 or tpr // 2 < units)


def test_register_caps_leave_out_the_launch_bounds_that_spill():
    """The census (reports/probes/fp32-plans-census.md) found ``held_t800_c2_m2`` compiled to 32
    registers with local memory at 12800 wide, and the 3-block bounds of 416-544 threads spilling
    too; the cap keeps them out and keeps 2 blocks of 512 at 8192 wide (53 registers, no spill)."""
    assert explore._register_cap(800, 2) == 32 and explore._register_cap(512, 2) == 56
    wide = fp32_candidates(384, 12800)
    assert not any(s.endswith(("_m3", "_m4")) for s in wide) and "held_t800_c2_m2" not in wide
    assert "held_t512_c2_m2" in fp32_candidates(8192, 8192)


def test_plan_names_take_whole_warps_only():
    assert launch_config("held_t800_c2", 384, 12800).kernel == "ln_held<800,4,4,1,2,0,0>"
    assert launch_config("held_t96_r2_c8_f", 256, 768).block == 192
    assert forward_plan(384, 12800, "fp32", True, named="fwd_t640_r1_p0").kernel.startswith("ln_fwd<float, 640, 5, 4, 1, false")
    for bad in ("held_t48", "held_t1056", "held_t0", "fwd_t48_r1_p0", "fwd_t1056_r1_p0", "fwd_t032_r1_p0"):
        with pytest.raises(Exception, match="unknown implementation"):
            OP.impl(bad)


def test_the_fp32_op_takes_training_forward_plans(monkeypatch):
    from nsys_tools.kernels import train_cuda

    impl = OP.impl("fwd_t256_r1_p1_f")
    assert impl.limit((1, 16384)) is None and "16384" in impl.limit((1, 16385))
    monkeypatch.setattr(train_cuda, "make_forward", lambda buffers, **options: options)
    assert impl.factory(None) == {"dtype": "fp32", "plan": "fwd_t256_r1_p1_f"}


def test_fwd_plans_on_the_fp32_op_go_to_the_op_explorer(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setattr(explore, "explore_op", lambda *a: calls.append(a))
    argv = ["--op", "layernorm", "--fwd-plans", "--impls", "ours,inductor,copy", "--shapes", "128x1024,384x12800"]
    explore.main([*argv, "--rounds", "2", "--iters", "7", "--out", str(tmp_path), "--drop", "128x1024:held_t96_r1_c8_f"])
    shapes, impls = ["128x1024", "384x12800"], ["ours", "inductor", "copy"]
    assert calls == [("layernorm", shapes, impls, True, tmp_path, 2, 7, "128x1024:held_t96_r1_c8_f")]


def test_planned_leaves_out_what_is_dropped():
    from nsys_tools.kernels.layernorm_bf16 import OP as BF16

    full = explore.planned(OP, ["384x12800", "128x1024"])
    assert full == {"384x12800": fp32_candidates(384, 12800), "128x1024": fp32_candidates(128, 1024)}
    less = explore.planned(OP, ["384x12800", "128x1024"], "384x12800:held_t800_c2,128x1024:held_t800_c2")
    assert less["384x12800"] == [p for p in full["384x12800"] if p != "held_t800_c2"] and less["128x1024"] == full["128x1024"]
    assert explore.planned(BF16, ["4096x4096"])["4096x4096"] == forward_candidates(4096, 4096, 2)


def test_op_summary_picks_the_fastest_plan_and_control():
    rows = [
        {"shape": "128x1024", "impl": "ours", "us": 2.5},
        {"shape": "128x1024", "impl": "inductor", "us": 2.0},
        {"shape": "128x1024", "impl": "liger", "us": 2.2},
        {"shape": "128x1024", "impl": "copy", "us": 1.25},
        {"shape": "128x1024", "impl": "held_t256_r1_c8_f", "us": 1.5},
        {"shape": "128x1024", "impl": "fwd_t64_r1_p0_f", "us": 2.4},
        {"shape": "128x1024", "impl": "fwd_t32_r4_p0_f", "us": float("nan")},  # no time: left out
        {"shape": "128x1024", "impl": "held_t32_r4_c0_f", "error": 1.0, "failed": "over the tolerance"},
    ]
    table = op_summary(rows, ["ours", "inductor", "liger", "copy"]).splitlines()
    assert table[2] == "| 128x1024 | 2.50 | held_t256_r1_c8_f | 1.50 | inductor | 2.00 | 1.25 | 0.750 | 1.250 | 1.200 |"


@pytest.mark.parametrize("shape", ["128x1024", "200x2047", "384x12800", "1000x9001"])
def test_the_prewarm_compiles_what_the_launchers_launch(monkeypatch, shape):
    """The worker processes fill CuPy's kernel cache with the very instantiations the timed process
    then asks for, from the file that holds each kernel."""
    from nsys_tools.kernels import cuda, train_cuda

    compiled = []
    monkeypatch.setattr(explore, "compile_kernels", lambda names, source=cuda.SOURCE: compiled.append((names, source)))
    m, n = map(int, shape.split("x"))
    names = forward_candidates(m, n, 4)
    for name in names:
        explore._compile_one("layernorm", shape, name)
    expected = [([kernel_of(p, m, n)], train_cuda.SOURCE if p.startswith("fwd_") else cuda.SOURCE) for p in names]
    assert compiled == expected
