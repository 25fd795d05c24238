"""The program Nsight Systems runs: one op, one shape, several implementations, one session.

    python -m capture.harness --shape 4096x768 --impls ours,triton,torch,copy --out DIR

Phases, in order:
  1. setup: one set of buffers per rotation slot, each implementation's launchers, and a
     correctness check of every implementation against a float64 reference (outputs poisoned);
  2. warm-up: ``--warmup`` calls of each implementation, untraced;
  3. trace: between cudaProfilerStart and cudaProfilerStop (``nsys profile
     --capture-range=cudaProfilerApi``), R rounds; in each round every implementation runs I
     calls inside one NVTX range, the order rotated by one each round;
  4. span: the same rounds again with tracing stopped, a CUDA event pair around every call.

NVTX range names: ``<op>/<impl>/<M>x<N>/<l2>/r<round>`` (see ``nsys_tools.sweep.RANGE``).
With ``--l2 cold`` the calls rotate over buffer sets that together exceed twice the L2, so
no call finds its inputs in cache; ``--l2 warm`` reuses one set.

Writes ``<out>/<shape>.harness.json``: parameters, checks, spans, clock samples, timings.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from kernels.registry import Problem, format_shape, parse_impls, parse_shape
from nsys_tools.files import write_text_atomically

from .gpu_state import ClockSampler

OP = "layernorm"


def range_name(op: str, impl: str, shape: str, l2: str, rnd: int) -> str:
    return f"{op}/{impl}/{shape}/{l2}/r{rnd}"


def rotated(names: list[str], rnd: int) -> list[str]:
    k = rnd % len(names)
    return names[k:] + names[:k]


def buffer_sets(m: int, n: int, l2_bytes: int, l2_mode: str) -> int:
    """How many (x, y) sets to rotate over: together more than twice the L2, or 1 when warm."""
    if l2_mode == "warm":
        return 1
    return max(2, math.ceil(2 * l2_bytes / (2 * m * n * 4)) + 1)


def relative_error(out, ref) -> float:
    import torch

    out64 = out.double()
    if not torch.isfinite(out64).all():
        return float("inf")
    return float((out64 - ref).norm() / ref.norm().clamp_min(1e-300))


def check(impl, launch, problem: Problem) -> float:
    """Relative error of one call against a float64 reference, with y poisoned beforehand."""
    import torch
    import torch.nn.functional as F

    problem.y.fill_(float("nan"))
    out = launch()
    torch.cuda.synchronize()
    out = problem.y if out is None else out
    if impl.computes == "copy":
        ref = problem.x.double()
    else:
        x = problem.x.double()
        ref = F.layer_norm(x, (x.shape[1],), problem.gamma.double(), problem.beta.double(), problem.eps)
    return relative_error(out, ref)


def _versions() -> dict[str, str]:
    import cupy
    import torch
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "cupy": cupy.__version__, "cuda": str(torch.version.cuda)}


def run(args: argparse.Namespace) -> dict:
    import torch

    t0 = time.perf_counter()
    m, n = parse_shape(args.shape)
    shape = format_shape(m, n)
    impls = parse_impls(args.impls)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    l2 = props.L2_cache_size
    sets = buffer_sets(m, n, l2, args.l2)
    gamma = torch.randn(n, device=dev)
    beta = torch.randn(n, device=dev)
    buffers = [(torch.randn(m, n, device=dev), torch.empty(m, n, device=dev)) for _ in range(sets)]

    launchers, checks, errors = {}, {}, {}
    for impl in impls:
        try:
            fns = [impl.setup(Problem(x, y, gamma, beta)) for x, y in buffers]
            checks[impl.name] = check(impl, fns[0], Problem(*buffers[0], gamma, beta))
            launchers[impl.name] = fns
        except Exception as exc:  # recorded per implementation; the others still run
            errors[impl.name] = f"{type(exc).__name__}: {exc}"
    names = list(launchers)
    t_setup = time.perf_counter()

    calls = 0

    def call(name: str) -> None:
        nonlocal calls
        launchers[name][calls % sets]()
        calls += 1

    for name in names:
        for _ in range(args.warmup):
            call(name)
    torch.cuda.synchronize()
    t_warm = time.perf_counter()

    sampler = ClockSampler(props.uuid, interval_s=args.sample_interval)
    others_before = sampler.other_processes()
    sampler.start()
    sampler.phase("trace")
    torch.cuda.profiler.start()
    for rnd in range(args.rounds):
        for name in rotated(names, rnd):
            torch.cuda.nvtx.range_push(range_name(OP, name, shape, args.l2, rnd))
            for _ in range(args.iters):
                call(name)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    t_trace = time.perf_counter()

    sampler.phase("span")
    events = []
    for rnd in range(args.rounds):
        for name in rotated(names, rnd):
            pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(args.iters)]
            for start, end in pairs:
                start.record()
                call(name)
                end.record()
            events.append((name, rnd, pairs))
    torch.cuda.synchronize()
    sampler.stop()
    others_after = sampler.other_processes()
    t_span = time.perf_counter()

    spans = {"impl": [], "round": [], "span_ns": []}
    for name, rnd, pairs in events:
        for start, end in pairs:
            spans["impl"].append(name)
            spans["round"].append(rnd)
            spans["span_ns"].append(round(start.elapsed_time(end) * 1e6))

    return {
        "op": OP,
        "shape": shape,
        "l2": args.l2,
        "rounds": args.rounds,
        "iters": args.iters,
        "warmup": args.warmup,
        "seed": args.seed,
        "impls": [i.name for i in impls],
        "gpu": {"name": props.name, "sm_count": props.multi_processor_count, "l2_bytes": l2},
        "buffer_sets": sets,
        "buffer_bytes": sets * 2 * m * n * 4,
        "checks": checks,
        "errors": errors,
        "span_method": (
            "CUDA events recorded on the launch stream immediately before and after each call, "
            "with Nsight Systems tracing stopped (after cudaProfilerStop); the same rounds, order "
            "and buffer rotation as the traced phase"
        ),
        "spans": spans,
        "clocks": sampler.samples(),
        "other_processes": {"before": others_before, "after": others_after},
        "versions": _versions(),
        "timings_s": {
            "setup": t_setup - t0,
            "warmup": t_warm - t_setup,
            "trace": t_trace - t_warm,
            "span": t_span - t_trace,
        },
    }


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m capture.harness", description=__doc__.split("\n\n")[0])
    p.add_argument("--shape", required=True, help="MxN, e.g. 4096x768")
    p.add_argument("--impls", required=True, help="comma-separated registry names")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--l2", choices=("cold", "warm"), default="cold")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sample-interval", type=float, default=0.005, help="seconds between clock samples")
    p.add_argument("--out", required=True, type=Path, help="folder for <shape>.harness.json")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    result = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{result['shape']}.harness.json"
    write_text_atomically(target, json.dumps(result))


if __name__ == "__main__":
    main()
