"""Explore launch plans of our kernels, timed beside the controls, before a sweep.

    python -m nsys_tools.capture.explore --shapes 4096x768,8192x768,1024x2048,4096x4096 --out DIR

For each shape it times every reasonable ``ln_held`` instantiation (threads per row, rows per
block, cache policy, grid-stride), every ``ln_bulk`` plan that fits in shared memory (threads,
rows in flight, blocks per SM, cache policy) and the registry's implementations, each checked
against a float64 reference first; ``--plans`` picks the kernels, ``--only`` limits it to names
the registry knows. ``--fwd-plans`` times instead, for either op (``--op layernorm`` for fp32,
``layernorm_bf16``), every plan of ``forward_candidates`` beside ``--impls``, as a sweep's rounds
run them, with CUPTI kernel times (``explore_op``). ``--timer flush`` (the default) is
``do_bench``: the L2 cleared before every call, the median of CUDA-event times. ``--timer
rotate`` runs the calls back to back over buffer sets past twice the L2, as a sweep does, and
reports the mean per call. ``--timer kernel`` runs
them as a sweep's rounds do (every implementation ``--iters`` calls a round, the order shuffled
anew each round from seed 0, over the same buffer sets) and reads each kernel's duration from CUPTI through
``torch.profiler``, as Nsight Systems does: launch gaps and per-call Python overhead (which
differ between CuPy, Triton and ``torch.compile``) stay out. ``--outputs`` picks the sweep's
output policy: ``rotate`` gives every buffer set its own output, ``reuse`` (the default) one
output per shape, as the caching allocator hands back a freed block; ``rotate,reuse`` times
both in one process. ``--plans
around`` names the register-held plans near the dispatcher's choice for each shape. This picks
the dispatcher's table; the committed performance numbers come from Nsight Systems sweeps.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path

from nsys_tools.convention import DEFAULT_OUTPUTS, OUTPUT_POLICIES, round_orders
from nsys_tools.kernels.cuda import SM_COUNT_DEFAULT, Held, Launch, compile_kernels, held_for, launch_config, launcher
from nsys_tools.kernels.layernorm import OP
from nsys_tools.kernels.registry import HELD_MAX_N, IMPLS, UnsupportedShape, get, problem

from .harness import buffer_sets, check

MARKER = "explore_marker"  # an empty kernel launched between blocks of calls, to split the CUPTI record


def held_candidates(m: int, n: int, sms: int) -> list[tuple[str, Launch]]:
    out = []
    for tpr in (32, 64, 128, 256, 512, 1024):
        slots = math.ceil(n / 4 / tpr)
        if slots > 8 or (slots == 1 and tpr * 4 >= 2 * n and tpr > 32):
            continue
        for rpb in (1, 2, 4):
            if tpr * rpb > 1024 or (rpb > 1 and tpr > 256):
                continue
            held = Held(tpr, slots, 4, rpb)
            out.append((f"held tpr={tpr} slots={slots} rpb={rpb}", Launch(held.name, math.ceil(m / rpb), held.threads)))
        for cache in (1, 2):
            held = Held(tpr, slots, 4, 1, cache)
            out.append((f"held tpr={tpr} slots={slots} cache={cache}", Launch(held.name, m, tpr)))
        for per_sm in (8, 16):
            held = Held(tpr, slots, 4)
            out.append((f"held tpr={tpr} slots={slots} grid={per_sm}/SM", Launch(held.name, min(m, per_sm * sms), tpr)))
        minb = max(1, 2048 // tpr)
        held = Held(tpr, slots, 4, 1, 0, minb)
        out.append((f"held tpr={tpr} slots={slots} minb={minb}", Launch(held.name, m, tpr)))
    return out


def bulk_candidates(m: int, n: int, sms: int) -> list[str]:
    """Names of the ``ln_bulk`` plans for this shape that fit: at most 8 float4 slots a thread."""
    out = []
    for tpr in (32, 64, 128, 256, 512, 1024):
        if math.ceil(n / 4 / tpr) > 8 or (tpr > 32 and tpr * 4 > n):
            continue
        for stages in (2, 3, 4, 6):
            for bps in (1, 2, 3, 4, 6, 8):
                for cache in ("", "_c2"):
                    name = f"bulk_t{tpr}_s{stages}_b{bps}{cache}"
                    try:
                        launch_config(name, m, n, 4, sms)
                    except UnsupportedShape:
                        continue
                    if 256 <= tpr * bps <= 2048:
                        out.append(name)
    return out


def around_candidates(m: int, n: int) -> list[str]:
    """Named plans near the dispatcher's for this shape: its threads per row under every cache
    policy (0, 2, 4, 5), each with and without gamma and beta loaded with x (+8); half and twice
    the threads under 0, 2, 5, 8 and 10; for rows of at most 1024 floats, one, two and four rows
    a block. Those that cannot hold the row in at most 8 float4 a thread are left out. Where the
    dispatcher compiles the width in, so do they (``_f``)."""
    plan = held_for(n, 4, m=m)
    names = [f"held_t{plan.tpr}_r{plan.rpb}_c{c + p}" for c in (0, 2, 4, 5) for p in (0, 8)]
    for tpr in (plan.tpr // 2, plan.tpr * 2):
        if 32 <= tpr <= 1024 and math.ceil(n / 4 / tpr) <= 8 and tpr * 4 < 2 * n:
            names += [f"held_t{tpr}_c{c}" for c in (0, 2, 5, 8, 10)]
    if plan.tpr == 32:
        names += [f"held_t32_r{r}_c{c}" for r in (1, 2, 4) if r != plan.rpb for c in (0, 5)]
    return [name + "_f" for name in names] if plan.nfix else names


def kernel_times(entries: list[tuple[str, list]], rounds: int = 3, iters: int = 50) -> dict[str, dict]:
    """Per label: the median over calls of the GPU time of one call (the sum of its kernels' and
    copies' CUPTI durations), the median of each round, and the kernels a call launches. Calls
    run as a sweep's rounds run them, one global rotation over the buffer sets."""
    import cupy as cp
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    marker = cp.RawKernel(f'extern "C" __global__ void {MARKER}() {{}}', MARKER)
    calls, order = 0, []
    for _, fns in entries:  # warm-up: every buffer set once
        for fn in fns:
            fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for rnd, round_order in enumerate(round_orders(entries, rounds, seed=0)):
            for label, fns in round_order:
                marker((1,), (1,), ())
                for _ in range(iters):
                    fns[calls % len(fns)]()
                    calls += 1
                order.append((label, rnd))
        marker((1,), (1,), ())
        torch.cuda.synchronize()
    device = [e for e in prof.profiler.kineto_results.events() if e.device_type() == DeviceType.CUDA]
    device.sort(key=lambda e: e.start_ns())
    blocks, current = [], None
    for e in device:
        if e.name() == MARKER:
            current = []
            blocks.append(current)
        elif current is not None:
            current.append(e)
    out: dict[str, dict] = {}
    for (label, _round), acts in zip(order, blocks, strict=False):
        per_call = len(acts) // iters
        rec = out.setdefault(label, {"calls_ns": [], "rounds_us": [], "kernels_per_call": per_call, "kernels": set()})
        if per_call == 0 or len(acts) % iters:
            rec["kernels_per_call"] = len(acts) / iters
            continue
        spans = [sum(a.duration_ns() for a in acts[i : i + per_call]) for i in range(0, len(acts), per_call)]
        rec["calls_ns"] += spans
        rec["rounds_us"].append(round(statistics.median(spans) / 1000, 3))
        rec["kernels"].update(a.name() for a in acts)
    for rec in out.values():
        rec["us"] = round(statistics.median(rec.pop("calls_ns")) / 1000, 3) if rec["rounds_us"] else float("nan")
        rec["kernels"] = sorted(rec["kernels"])
    return out


def rotated_us(fns, reps: int = 7, calls: int = 60) -> float:
    """Mean time per call of ``calls`` back-to-back calls rotating over buffer sets (the sweep's
    cold-L2 conditions: every call finds the previous call's output dirty in the L2), measured by
    CUDA events around the batch; the median over ``reps`` batches, in µs. Launch gaps are
    included, so only kernels well past launch overhead compare fairly."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps + 1):  # the first batch warms up
        start.record()
        for i in range(calls):
            fns[i % len(fns)]()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000 / calls)
    return statistics.median(times[1:])


def _problems(m: int, n: int, sets: int, outputs: str = "rotate") -> list:
    """``sets`` LayerNorm buffer sets; with ``outputs="reuse"`` they share one output."""
    import torch

    torch.manual_seed(0)
    gamma, beta = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    ys = [torch.empty(m, n, device="cuda") for _ in range(sets if outputs == "rotate" else 1)]
    return [problem(torch.randn(m, n, device="cuda"), ys[k % len(ys)], gamma, beta) for k in range(sets)]


def summary(rows: list[dict], controls: tuple[str, ...] = ("triton", "inductor", "liger", "torch")) -> str:
    """One line per shape and output policy: ours, the fastest plan measured, each control, and
    ours over the best control and over the copy."""
    cells: dict[tuple[str, str], dict[str, float]] = {}
    for r in rows:
        if "us" in r and r["rel_err"] < 1e-5:
            cells.setdefault((r["shape"], r.get("outputs", "rotate")), {})[r["config"]] = r["us"]
    head = ["shape", "outputs", "ours", "best plan", *controls, "copy", "ours/best ctl", "ours/copy"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for (shape, outputs), c in cells.items():
        ours, copy = c.get("impl ours", math.nan), c.get("impl copy", math.nan)
        plans = {k: v for k, v in c.items() if not k.startswith("impl ")}
        best = min(plans, key=plans.get) if plans else ""
        ctl = [c.get(f"impl {k}", math.nan) for k in controls]
        best_ctl = min((v for v in ctl if v == v), default=math.nan)
        vals = [f"{ours:.2f}", f"{plans[best]:.2f} {best}" if best else "", *(f"{v:.2f}" for v in ctl), f"{copy:.2f}"]
        lines.append(f"| {shape} | {outputs} | " + " | ".join(vals) + f" | {ours / best_ctl:.3f} | {ours / copy:.3f} |")
    return "\n".join(lines)


FP32 = 4
FEW_ROWS = 1024  # one wave or less: 1024 rows fill 132 SMs with at most 8 one-row blocks each
NARROW_BYTES = 8 * 1024  # rows up to 2048 floats: the width compiled in, several rows a block
REGISTERS_PER_SM = 65536
SPARE_REGISTERS = 20  # what a held row needs beyond its slots: pointers, indices, sums (sm_90 census)


def _register_cap(threads: int, blocks: int) -> int:
    """The registers a thread keeps when ``blocks`` of ``threads`` must fit an SM: the share, in
    the allocation's steps of 8, less the 8 NVRTC leaves unused (800 threads x 2 blocks: 40,
    compiled to 32)."""
    return REGISTERS_PER_SM // (blocks * threads) // 8 * 8 - 8


def forward_candidates(m: int, n: int, element_bytes: int = 2) -> list[str]:
    """Explicit plans of our forward worth timing at ``m x n``: in bf16 (``element_bytes`` 2)
    those of the training forward (``fwd_...``, kernels/train_cuda.py) for 16-byte vector rows:
    every threads-per-row count that holds the row in 1 to
    8 vectors a thread without idle warps, one to four rows a block for rows of one or two warps,
    gamma and beta preloaded or not, all converting bf16 by single instructions (``_c``); and the
    row-striding kernel at one and two blocks' worth of
    1024 threads per SM for the counts that hold 2 to 4 vectors a thread. Rows that are not whole
    vectors are held element by element, up to 16 a thread. In fp32, ``fp32_candidates``."""
    if element_bytes == FP32:
        return fp32_candidates(m, n)
    vec = 16 // element_bytes if n % (16 // element_bytes) == 0 else 1
    fixed = "_f" if n * element_bytes <= 8 * 1024 else ""
    names = []
    for tpr in (32, 64, 128, 256, 512, 1024):
        slots = math.ceil(n / vec / tpr)
        if slots > (8 if vec > 1 else 16) or (tpr > 32 and (tpr // 2) * vec >= n):
            continue
        for rpb in (1, 2, 4) if tpr <= 64 else (1,):
            names += [f"fwd_t{tpr}_r{rpb}_p{p}{fixed}_c" for p in (0, 1)]
        if 2 <= slots <= 4:
            rpb = max(1, 128 // tpr)
            names += [f"fwd_t{tpr}_r{rpb}_p{p}{fixed}_c_g{g * 1024 // (tpr * rpb)}" for p in (0, 1) for g in (1, 2)]
    return names


def _threads(units: int, max_slots: int) -> list[int]:
    """Threads per row that hold ``units`` vectors (or elements) in at most ``max_slots`` a
    thread without a warp that holds nothing: the powers of two, and for rows whose width no
    power of two divides well, the whole number of warps that leaves fewest masked slots at
    each slot count (3200 vectors: 800 threads of 4, 640 of 5, where 1024 threads would mask
    22 % of their slots and 512 12.5 %)."""
    pow2 = [t for t in (32, 64, 128, 256, 512, 1024) if math.ceil(units / t) <= max_slots and (t == 32 or t // 2 < units)]
    exact = []
    for slots in range(max(2, math.ceil(units / 1024)), max_slots + 1):
        tpr = 32 * math.ceil(units / slots / 32)
        waste = slots * tpr - units
        if tpr <= 1024 and tpr not in pow2 and all(waste < math.ceil(units / t) * t - units for t in pow2 if t >= tpr):
            exact.append(tpr)
    return sorted(set(pow2 + exact))


def fp32_candidates(m: int, n: int) -> list[str]:
    """Explicit plans of the fp32 forward worth timing at ``m x n`` (16-byte vector rows when
    N % 4 == 0, else element rows of up to 16 elements a thread), in two regimes:

    - **Narrow rows** (at most 8 KB): the shipped kernel (``held_...``) at every threads-per-row
      count of ``_threads``, one to four rows a block (up to 256 threads), gamma and beta loaded
      with x (``_c8``) or after the reduction (``_c0``), the width compiled in; at one wave or
      less (``FEW_ROWS``) the same layouts of the training forward (``fwd_...``: no row loop,
      which is what Inductor's persistent reduction is: one straight pass, N a constant).
    - **Wide rows**: the shipped kernel at every count of ``_threads``, plain and streaming
      (``_c2``), with the preload up to 256 threads; a launch bound (``_m``) that asks for as
      many blocks an SM as there are rows for it (all rows in one wave), and for the most blocks
      whose register cap leaves ``SPARE_REGISTERS`` over the row's (tighter caps spill:
      ``reports/probes/fp32-plans-census.md``); the training forward without the preload, and
      striding over rows with the next row in flight (``_g``) where two rows fit the registers; the row staged in shared memory
      (``staged_...``); and for one wave or less, the row split over a cluster of 2 or 4 blocks.

    None past ``HELD_MAX_N``, where ours is ``block_tree``.
    """
    if n > HELD_MAX_N:
        return []
    vec = 4 if n % 4 == 0 else 1
    units = math.ceil(n / vec)
    threads = _threads(units, 8 if vec > 1 else 16)
    names = []
    if n * FP32 <= NARROW_BYTES:
        for tpr in threads:
            for rpb in (1, 2, 4):
                if tpr * rpb > 256 and rpb > 1:
                    continue
                names += [f"held_t{tpr}_r{rpb}_c{c}_f" for c in (0, 8)]
                if m <= FEW_ROWS:
                    names += [f"fwd_t{tpr}_r{rpb}_p{p}_f" for p in (0, 1)]
        return names
    for tpr in threads:
        slots = math.ceil(units / tpr)
        names += [f"held_t{tpr}_c{c}" for c in ((0, 2, 8, 10) if tpr <= 256 else (0, 2))]
        fits = [k for k in range(2, 2048 // tpr + 1) if _register_cap(tpr, k) >= vec * slots + SPARE_REGISTERS]
        names += [f"held_t{tpr}_c2_m{k}" for k in sorted({math.ceil(m / SM_COUNT_DEFAULT), max(fits, default=0)} & set(fits))]
        names.append(f"fwd_t{tpr}_r1_p0")
        if 2 * vec * slots + 24 <= REGISTERS_PER_SM // tpr:
            names += [f"fwd_t{tpr}_r1_p0_g{g}" for g in sorted({1, max(1, 1024 // tpr)})]
    if vec == 4:
        names += [f"staged_t{tpr}_c{c}" for tpr in (256, 512, 1024) if tpr // 2 < units for c in (0, 2)]
        if m <= FEW_ROWS:
            names += [f"cluster_c{cs}_t{tpb}" for cs, tpb in ((2, 256), (2, 512), (4, 256)) if units <= 8 * cs * tpb]
    return names


def _prewarm(names_by_shape: dict[str, list[str]], op_name: str) -> None:
    """Compile every NVRTC kernel the explicit plans need in parallel worker processes, so that
    CuPy's kernel cache holds them before the timed process asks for them one at a time."""
    import multiprocessing

    jobs = [(op_name, shape, name) for shape, names in names_by_shape.items() for name in names]
    with multiprocessing.get_context("spawn").Pool(min(16, max(1, len(jobs)))) as pool:
        pool.starmap(_compile_one, jobs, chunksize=1)


def _compile_one(op_name: str, shape: str, name: str) -> None:
    from nsys_tools.kernels.plans import FORWARD_NAME
    from nsys_tools.kernels.train_cuda import SOURCE, forward_plan

    m, n = (int(v) for v in shape.split("x"))
    dtype = "bf16" if op_name == "layernorm_bf16" else "fp32"
    try:
        if FORWARD_NAME.match(name):
            compile_kernels([forward_plan(m, n, dtype, n % (8 if dtype == "bf16" else 4) == 0, named=name).kernel], SOURCE)
        else:  # the fp32 kernels of layernorm.cu
            compile_kernels([launch_config(name, m, n, 4 if n % 4 == 0 else 1).kernel])
    except UnsupportedShape:
        pass


def planned(op, shapes: list[str], drop: str = "") -> dict[str, list[str]]:
    """Per shape, the plans ``forward_candidates`` gives for ``op``'s element size, but those
    ``drop`` names (``SHAPE:PLAN,...``)."""
    dropped = set(drop.split(",")) if drop else set()
    element_bytes = 2 if op.dtype == "bf16" else FP32
    return {s: [p for p in forward_candidates(*op.parse_shape(s), element_bytes) if f"{s}:{p}" not in dropped] for s in shapes}


def explore_op(
    op_name: str, shapes: list[str], impls: list[str], plans: bool, out: Path, rounds: int, iters: int, drop: str = ""
) -> list[dict]:
    """Time an op's implementations (and, with ``plans``, the explicit forward plans of
    ``forward_candidates`` for the op's element size, but those ``drop`` names as
    ``SHAPE:PLAN,...``) as a sweep's rounds run them: buffer sets
    past twice the L2 with one output per shape, each implementation checked against the float64
    reference first, CUPTI kernel durations. One row per shape and implementation, written to
    ``out/explore.json``; the closing table is ``op_summary``'s."""
    import torch

    from nsys_tools.plugin.loader import Registry

    from .harness import make_sets, prepare

    op = Registry([f"nsys_tools.kernels.{op_name}"]).op(op_name)
    props = torch.cuda.get_device_properties(0)
    named = planned(op, shapes, drop) if plans else dict.fromkeys(shapes, [])
    if plans:
        t0 = time.perf_counter()
        _prewarm(named, op_name)
        print(f"compiled {sum(map(len, named.values()))} plans in {time.perf_counter() - t0:.1f}s", flush=True)
    rows: list[dict] = []
    for shape in shapes:
        t0 = time.perf_counter()
        dims = op.parse_shape(shape)
        torch.manual_seed(0)
        sets = make_sets(op, dims, "cuda", props.L2_cache_size, "cold", "reuse")
        chosen = [op.impl(name) for name in dict.fromkeys(impls + named[shape])]
        launchers, checks, errors, unsupported = prepare(op, chosen, sets, torch.cuda.synchronize)
        entries = [(name, fns) for name, fns in launchers.items() if checks[name] <= op.tolerance()]
        times = kernel_times(entries, rounds, iters)
        for name in [i.name for i in chosen]:
            row = {"shape": shape, "impl": name, "error": checks.get(name), "failed": errors.get(name) or unsupported.get(name)}
            rows.append(row | {k: v for k, v in times.get(name, {}).items() if k != "kernels"})
        mine = sorted((r for r in rows if r["shape"] == shape and "us" in r), key=lambda r: r["us"])
        best = next((r for r in mine if r["impl"] not in impls), None)
        shown = [r for r in mine if r["impl"] in impls] + ([best] if best else [])
        print(f"{shape} ({time.perf_counter() - t0:.1f}s): " + ", ".join(f"{r['impl']} {r['us']:.2f}" for r in shown), flush=True)
        out.mkdir(parents=True, exist_ok=True)
        (out / "explore.json").write_text(json.dumps(rows, indent=1))
    print(op_summary(rows, impls), flush=True)
    return rows


def op_summary(rows: list[dict], impls: list[str]) -> str:
    """One line per shape of ``explore_op``'s rows: ours, the fastest explicit plan, the best
    of the other implementations but the copy, the copy, and the ratios that pick a rule (the best
    plan and ours over the best control, and over the copy). Plans are the rows whose name is
    not among ``impls``; a row without a time (failed, unsupported, or over the tolerance) is
    left out."""
    by_shape: dict[str, dict[str, float]] = {}
    for r in rows:
        if "us" in r and not math.isnan(r["us"]):
            by_shape.setdefault(r["shape"], {})[r["impl"]] = r["us"]
    head = ["shape", "ours", "best plan", "plan us", "best control", "control us", "copy", "plan/ctl", "ours/ctl", "plan/copy"]
    align = ["---", "---:", "---", "---:", "---", "---:", "---:", "---:", "---:", "---:"]
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(align) + "|"]
    for shape, times in by_shape.items():
        plans = {k: v for k, v in times.items() if k not in impls}
        controls = {k: v for k, v in times.items() if k in impls and k not in ("ours", "copy")}
        plan = min(plans, key=plans.get) if plans else ""
        ctl = min(controls, key=controls.get) if controls else ""
        ours, copy = times.get("ours", math.nan), times.get("copy", math.nan)
        p, c = plans.get(plan, math.nan), controls.get(ctl, math.nan)
        cells = [shape, f"{ours:.2f}", plan, f"{p:.2f}", ctl, f"{c:.2f}", f"{copy:.2f}", f"{p / c:.3f}", f"{ours / c:.3f}"]
        lines.append("| " + " | ".join([*cells, f"{p / copy:.3f}"]) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m nsys_tools.capture.explore", description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="4096x768,8192x768,1024x2048,4096x4096")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--plans", default="held,bulk", help="which kernels' launch plans to sweep: held, bulk, around")
    p.add_argument("--only", default="", help="comma-separated registry names: time these and --impls only")
    p.add_argument(
        "--timer",
        choices=["flush", "rotate", "kernel"],
        default="flush",
        help="flush: do_bench, the L2 cleared before each call; rotate: back-to-back calls over buffer sets past 2x "
        "the L2, events around the batch; kernel: the same calls in a sweep's rounds, CUPTI kernel durations",
    )
    p.add_argument("--outputs", default=DEFAULT_OUTPUTS, help="rotate (an output per buffer set), reuse (one per shape), or both")
    p.add_argument("--rounds", type=int, default=3, help="--timer kernel: rounds")
    p.add_argument("--iters", type=int, default=50, help="--timer kernel: calls per implementation per round")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--op", default="layernorm", help="another op than the fp32 LayerNorm: its --impls, CUPTI kernel times")
    p.add_argument(
        "--fwd-plans",
        action="store_true",
        help="time the explicit forward plans of forward_candidates too (either op), as the other ops are timed",
    )
    p.add_argument("--drop", default="", help="with --fwd-plans: SHAPE:PLAN,... left out (plans the census finds spilling)")
    args = p.parse_args(argv)
    if args.op != "layernorm" or args.fwd_plans:
        impls = [i.strip() for i in args.impls.split(",")] if args.impls != ",".join(IMPLS) else []
        explore_op(args.op, args.shapes.split(","), impls, args.fwd_plans, args.out, args.rounds, args.iters, args.drop)
        return
    policies = [o.strip() for o in args.outputs.split(",")]
    if not policies or set(policies) - set(OUTPUT_POLICIES):
        p.error(f"--outputs takes {' or '.join(OUTPUT_POLICIES)}, or both comma-separated")
    import torch
    from triton.testing import do_bench

    props = torch.cuda.get_device_properties(0)
    sms = props.multi_processor_count
    rows = []
    for shape in args.shapes.split(","):
        m, n = OP.parse_shape(shape)
        plans = set(args.plans.split(","))
        cands = held_candidates(m, n, sms) if "held" in plans and not args.only else []
        names, kernels = [], [launch.kernel for _, launch in cands]
        listed = args.only.split(",") if args.only else []
        listed += around_candidates(m, n) if "around" in plans else []
        listed += bulk_candidates(m, n, sms) if "bulk" in plans and not args.only else []
        for name in dict.fromkeys(listed):
            try:
                kernels.append(launch_config(name, m, n, 4, sms).kernel)
                names.append(name)
            except UnsupportedShape as exc:  # this plan cannot hold this shape
                rows.append({"shape": shape, "config": name, "error": str(exc)})
        t0 = time.perf_counter()
        compile_kernels(kernels)
        print(f"{shape}: compiled {len(kernels)} configs in {time.perf_counter() - t0:.1f}s", flush=True)
        for outputs in policies:
            set_bytes = m * n * 4 * (2 if outputs == "rotate" else 1)  # x, and y when it rotates
            sets = buffer_sets(set_bytes, props.L2_cache_size, "cold") if args.timer != "flush" else 1
            probs = _problems(m, n, sets, outputs)
            entries = [(label, [launcher(prob, launch) for prob in probs], None) for label, launch in cands]
            for name in names + args.impls.split(","):
                label = name if name in names else f"impl {name}"
                try:
                    impl = get(name)
                    entries.append((label, [impl.setup(prob) for prob in probs], impl))
                except Exception as exc:
                    rows.append({"shape": shape, "outputs": outputs, "config": label, "error": str(exc)})
            checked = []
            for label, fns, impl in entries:
                try:
                    err = check(OP, impl or IMPLS["ours"], fns[0], probs[0], torch.cuda.synchronize)
                    if args.timer == "rotate":
                        res = {"us": rotated_us(fns)}
                    elif args.timer == "flush":
                        res = {"us": do_bench(fns[0], warmup=10, rep=40, return_mode="median") * 1000}
                    else:
                        res = {}
                except Exception as exc:  # a plan the GPU refuses to launch: record it, go on
                    print(f"  {label}: {exc}", flush=True)
                    rows.append({"shape": shape, "outputs": outputs, "config": label, "error": str(exc)})
                    continue
                checked.append((label, fns))
                rows.append({"shape": shape, "outputs": outputs, "config": label, "timer": args.timer, "rel_err": err, **res})
            if args.timer == "kernel":
                times = kernel_times(checked, args.rounds, args.iters)
                for r in rows:
                    if r["shape"] == shape and r.get("outputs") == outputs and r["config"] in times and "rel_err" in r:
                        r.update(times[r["config"]])
            mine = [r for r in rows if r["shape"] == shape and r.get("outputs") == outputs and "us" in r]
            best = sorted((r for r in mine if r["rel_err"] < 1e-5), key=lambda r: r["us"])
            print(f"{shape} outputs={outputs}", flush=True)
            for r in best[:8] + [r for r in mine if r["config"].startswith("impl")]:
                calls = r.get("kernels_per_call", "")
                print(f"  {r['us']:8.2f} us  {r['config']}  err={r['rel_err']:.1e}  k/call={calls}", flush=True)
            args.out.mkdir(parents=True, exist_ok=True)
            (args.out / "explore.json").write_text(json.dumps(rows, indent=1))  # after every shape: a crash keeps the rest
    print(summary(rows), flush=True)


if __name__ == "__main__":
    main()
