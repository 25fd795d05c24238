"""The program Nsight Systems runs: one op, one shape, several implementations, one session.

    python -m nsys_tools.capture.harness --op layernorm --shape 4096x768 --impls ours,triton,torch,copy --out DIR

The op and its implementations come from plugins (``nsys_tools.plugin``): installed ones
through the ``nsys_tools.ops`` entry points, others through ``--plugin FILE_OR_MODULE`` and
``--impls pkg.module:factory``. Phases, in order:
  1. setup: one set of buffers per rotation slot (outputs per slot or one per shape, by the
     output policy), each implementation's launchers, and a correctness check of every
     implementation against the op's float64 reference (outputs poisoned first);
  2. warm-up: ``--warmup`` calls of each implementation, untraced; then, with ``--settle S``,
     calls of every implementation in turn for S seconds more, so that a compute-bound op is
     measured at the clock its own power draw holds the GPU to, not at the faster clock of a
     cool GPU that only the first round would see;
  3. trace: between cudaProfilerStart and cudaProfilerStop (``nsys profile
     --capture-range=cudaProfilerApi``), R rounds; in each round every implementation runs I
     calls inside one NVTX range, in an order shuffled anew each round from ``--seed``
     (``nsys_tools.convention.round_orders``; the orders are recorded);
  4. span: the same rounds, in the same orders, with tracing stopped, a CUDA event pair around
     every call.

NVTX range names: ``<op>/<impl>/<shape>/<l2>/r<round>`` (``nsys_tools.convention``).
With ``--l2 cold`` the calls rotate over buffer sets that together exceed twice the L2, so
no call finds its inputs in cache; ``--l2 warm`` reuses one set. ``--outputs rotate`` gives
every set its own outputs (every write lands in a cold buffer); ``--outputs reuse`` gives every
implementation the same outputs per shape.

Writes ``<out>/<shape>.harness.json``: parameters, checks, each round's order, spans, clock
samples, timings.

``--prepare`` runs the setup alone, on one buffer set, and prints what it did as one JSON line:
a sweep runs it for its shapes in parallel before the first capture, so that the kernels' compile
caches (Triton's, Inductor's, NVRTC's) are filled and each capture's setup only loads them.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from nsys_tools.convention import DEFAULT_OUTPUTS, L2_MODES, OUTPUT_POLICIES, range_name, round_orders
from nsys_tools.errors import NsysToolsError
from nsys_tools.files import write_text_atomically
from nsys_tools.plugin.api import Buffers, Impl, Op, UnsupportedShape
from nsys_tools.plugin.loader import Registry

from .gpu_state import ClockSampler

# Libraries whose versions a header should carry when the run loaded them.
VERSIONED = ("torch", "triton", "cupy", "liger_kernel", "cutlass", "numba")


def buffer_sets(set_bytes: int, l2_bytes: int, l2_mode: str) -> int:
    """How many buffer sets to rotate over: together more than twice the L2, or 1 when warm.
    ``set_bytes`` is what one set holds that rotates (inputs, and outputs when they rotate)."""
    if l2_mode == "warm":
        return 1
    return max(2, math.ceil(2 * l2_bytes / max(set_bytes, 1)) + 1)


def nbytes(tensors: Mapping[str, Any]) -> int:
    """Bytes held by the arrays in ``tensors`` (scalars count nothing)."""
    return sum(int(getattr(t, "nbytes", 0) or 0) for t in tensors.values())


def make_sets(op: Op, shape: tuple[int, ...], device: str, l2_bytes: int, l2: str, outputs: str) -> list[Buffers]:
    """The buffer sets of one shape: constants once, inputs per set, outputs per set
    (``rotate``) or once (``reuse``), enough sets to exceed twice the L2 when cold."""
    constants = op.constants(shape, device)
    inputs = [op.inputs(shape, device)]
    outs = [op.outputs(shape, device)]
    rotating = nbytes(inputs[0]) + (nbytes(outs[0]) if outputs == "rotate" else 0)
    sets = buffer_sets(rotating, l2_bytes, l2)
    for _ in range(1, sets):
        inputs.append(op.inputs(shape, device))
        if outputs == "rotate":
            outs.append(op.outputs(shape, device))
    return [Buffers(shape, inputs[k], outs[k if outputs == "rotate" else 0], constants) for k in range(sets)]


def produced(buffers: Buffers, returned: Any) -> dict[str, Any]:
    """What a call produced, by output name: ``buffers``' outputs, or what an allocating
    implementation returned (one tensor, or a tuple in the op's output order)."""
    if returned is None:
        return {name: getattr(buffers, name) for name in buffers.outputs}
    values = returned if isinstance(returned, (tuple, list)) else (returned,)
    return dict(zip(buffers.outputs, values, strict=False))


def check(op: Op, impl: Impl, launch: Callable[[], Any], buffers: Buffers, sync: Callable[[], None] = lambda: None) -> float:
    """The largest error of one call's outputs against the float64 reference, outputs poisoned
    beforehand (an output an implementation does not produce counts as infinitely wrong)."""
    op.poison({name: getattr(buffers, name) for name in buffers.outputs})
    returned = launch()
    sync()
    out = produced(buffers, returned)
    expected = (impl.reference or op.reference)(buffers)
    return max((op.error(out[name], ref) if name in out else math.inf) for name, ref in expected.items())


def prepare(
    op: Op, impls: Sequence[Impl], sets: list[Buffers], sync: Callable[[], None] = lambda: None
) -> tuple[dict[str, list], dict[str, float], dict[str, str], dict[str, str]]:
    """Per implementation: launchers for every set and the correctness check. Returns
    (launchers, checks, errors, unsupported); an implementation whose factory raises or whose
    launch fails is recorded in ``errors`` (``unsupported`` for ``UnsupportedShape``) and left
    out, and the others still run."""
    launchers, checks, errors, unsupported = {}, {}, {}, {}
    for impl in impls:
        try:
            fns = [impl.setup(b) for b in sets]
            checks[impl.name] = check(op, impl, fns[0], sets[0], sync)
            launchers[impl.name] = fns
        except UnsupportedShape as exc:
            unsupported[impl.name] = exc.problem
        except Exception as exc:  # recorded per implementation; the others still run
            errors[impl.name] = f"{type(exc).__name__}: {exc}"
    return launchers, checks, errors, unsupported


def setup(op: Op, impls: Sequence[Impl], sets: list[Buffers], sync: Callable[[], None] = lambda: None):
    """``prepare``, failing with one line when no implementation can run at all."""
    launchers, checks, errors, unsupported = prepare(op, impls, sets, sync)
    if not launchers:
        why = "; ".join(f"{k}: {v}" for k, v in {**errors, **unsupported}.items())
        raise NsysToolsError(None, f"no implementation of {op.name} ran at {op.format_shape(sets[0].shape)}", why)
    return launchers, checks, errors, unsupported


def describe(op: Op, impl: Impl, shape: tuple[int, ...], outputs: str) -> dict[str, Any]:
    """What a report needs to know about one implementation without loading its plugin."""
    return {
        "family": impl.family,
        "summary": impl.summary,
        "allocates": impl.allocates,
        "outputs": "allocates" if impl.allocates else outputs,
        "tolerance": op.tolerance(),
        **op.work(impl, shape),
    }


def _versions() -> dict[str, str]:
    import torch

    found = {name: str(getattr(sys.modules[name], "__version__", "")) for name in VERSIONED if name in sys.modules}
    return {**{k: v for k, v in found.items() if v}, "cuda": str(torch.version.cuda)}


def plan(args: argparse.Namespace) -> tuple[Op, str, list[Impl]]:
    """The op, the shape's canonical text and the implementations the arguments name, loaded
    from the plugins exactly as the sweep driver resolved them (no GPU needed)."""
    registry = Registry(args.plugin)
    op = registry.op(args.op)
    return op, op.canonical(args.shape), registry.impls(op, args.impls)


def _seeded(args: argparse.Namespace):
    """``plan``'s op, shape text and implementations, the shape, and the GPU's properties, with
    torch's generator seeded from ``--seed`` (the inputs are drawn next)."""
    import torch

    op, shape_text, impls = plan(args)
    torch.manual_seed(args.seed)
    return op, shape_text, op.parse_shape(shape_text), impls, torch.cuda.get_device_properties(torch.device("cuda"))


def prepare_only(args: argparse.Namespace) -> dict:
    """Setup alone on one buffer set (no warm-up, no trace): builds and checks every
    implementation, so that a capture of the same shape finds its kernels compiled."""
    import torch

    t0 = time.perf_counter()
    op, shape_text, shape, impls, props = _seeded(args)
    sets = make_sets(op, shape, "cuda", props.L2_cache_size, "warm", args.outputs)  # warm: one set
    launchers, checks, errors, unsupported = prepare(op, impls, sets, torch.cuda.synchronize)
    return {
        "shape": shape_text,
        "prepared": list(launchers),
        "errors": errors,
        "unsupported": unsupported,
        "setup_s": round(time.perf_counter() - t0, 3),
    }


def run(args: argparse.Namespace) -> dict:
    import torch

    t0 = time.perf_counter()
    op, shape_text, shape, impls, props = _seeded(args)
    l2 = props.L2_cache_size
    sets = make_sets(op, shape, "cuda", l2, args.l2, args.outputs)
    launchers, checks, errors, unsupported = setup(op, impls, sets, torch.cuda.synchronize)
    names = list(launchers)
    orders = round_orders(names, args.rounds, args.seed)
    t_setup = time.perf_counter()

    calls = 0
    count = len(sets)

    def call(name: str) -> None:
        nonlocal calls
        launchers[name][calls % count]()
        calls += 1

    for name in names:
        for _ in range(args.warmup):
            call(name)
    torch.cuda.synchronize()

    sampler = ClockSampler(props.uuid, interval_s=args.sample_interval)
    others_before = sampler.other_processes()
    sampler.start()
    sampler.phase("settle")
    settle_until = time.perf_counter() + args.settle
    while time.perf_counter() < settle_until:
        for name in names:
            call(name)
        torch.cuda.synchronize()
    t_warm = time.perf_counter()
    sampler.phase("trace")
    torch.cuda.profiler.start()
    for rnd, order in enumerate(orders):
        for name in order:
            torch.cuda.nvtx.range_push(range_name(op.name, name, shape_text, args.l2, rnd, args.iters))
            for _ in range(args.iters):
                call(name)
            torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    t_trace = time.perf_counter()

    sampler.phase("span")
    events = []
    for rnd, order in enumerate(orders):
        for name in order:
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
        "op": op.name,
        "shape": shape_text,
        "l2": args.l2,
        "outputs": args.outputs,
        "rounds": args.rounds,
        "iters": args.iters,
        "warmup": args.warmup,
        "settle_s": args.settle,
        "seed": args.seed,
        "order": "shuffled",
        "orders": orders,
        "impls": [i.name for i in impls],
        "implementations": {i.name: describe(op, i, shape, args.outputs) for i in impls},
        "gpu": {"name": props.name, "sm_count": props.multi_processor_count, "l2_bytes": l2},
        "buffer_sets": count,
        "buffer_bytes": sum(nbytes(b.tensors) for b in sets),
        "checks": checks,
        "errors": errors,
        "unsupported": unsupported,
        "span_method": (
            "CUDA events recorded on the launch stream immediately before and after each call, "
            "with Nsight Systems tracing stopped (after cudaProfilerStop); the same rounds, orders "
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
    p = argparse.ArgumentParser(prog="python -m nsys_tools.capture.harness", description=__doc__.split("\n\n")[0])
    p.add_argument("--op", required=True, help="op name (installed, or from --plugin)")
    p.add_argument("--plugin", action="append", default=[], help="plugin file or module (repeatable)")
    p.add_argument("--shape", required=True, help="a shape as the op writes it, e.g. 4096x768")
    p.add_argument("--impls", required=True, help="comma-separated names or pkg.module:factory entries")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--settle", type=float, default=0.0, help="seconds of untraced calls after the warm-up")
    p.add_argument("--l2", choices=L2_MODES, default="cold")
    p.add_argument("--outputs", choices=OUTPUT_POLICIES, default=DEFAULT_OUTPUTS)
    p.add_argument("--seed", type=int, default=0, help="seeds the inputs and every round's order of implementations")
    p.add_argument("--sample-interval", type=float, default=0.005, help="seconds between clock samples")
    p.add_argument("--out", type=Path, help="folder for <shape>.harness.json (required unless --prepare)")
    p.add_argument("--prepare", action="store_true", help="only build and check the implementations; print JSON")
    args = p.parse_args(argv)
    if not args.prepare and args.out is None:
        p.error("--out is required")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    try:
        if args.prepare:
            print(json.dumps(prepare_only(args)))
            return
        result = run(args)
    except NsysToolsError as err:  # one line, which the sweep records as the shape's error
        print(f"Error: {err}", file=sys.stderr)
        raise SystemExit(1) from None
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / f"{result['shape']}.harness.json"
    write_text_atomically(target, json.dumps(result))


if __name__ == "__main__":
    main()
