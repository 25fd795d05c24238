"""Build, check and time matmul implementations with CUDA events: the lineage's numbers.

    python -m nsys_tools.capture.matmul_bench --shapes 4096x4096x4096,8192x8192x8192 --dtypes bf16,tf32 \\
        --impls torch,triton,simt,mma,wgmma --out DIR

For each dtype and shape it allocates buffer sets that together exceed twice the L2 (rotated
call by call, so no call finds its operands in cache), builds every implementation's launcher
for every set, checks each against a float64 reference on its first set (output poisoned with
NaN; relative Frobenius error and ``elementwise_error``), then times: after a warm-up, R rounds,
each running every implementation (in an order shuffled anew each round) for about ``--ms``
milliseconds of back-to-back calls over the rotated sets with a CUDA event pair around every
call, queued behind a GPU sleep so that launch overhead stays out (kernel time, as a trace
would give it, not the event span a caller sees). The order matters on the H200: a kernel that
runs right after slow, low-power ones finds the SM clock higher and ran up to 12% faster than
the same kernel after fast ones; a fixed rotation keeps each implementation's predecessor, a
shuffle does not. Per implementation it reports the median call time over all rounds, the median of each
round (their spread is the noise), TFLOP/s and the ratio to cuBLAS (``torch``). Results are
written to ``DIR/matmul-bench.json`` after every shape, so a failure keeps what came before.
This is the exploration tool; the numbers for issue threads come from Nsight Systems sweeps.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from nsys_tools.kernels.matmul import ELEMENTWISE_TOLERANCE, OPS, elementwise_error
from nsys_tools.plugin import Buffers


def buffer_sets(op, shape, l2_bytes: int) -> int:
    """How many buffer sets to rotate over: together more than twice the L2."""
    return max(2, math.ceil(2 * l2_bytes / op.bytes_moved(shape)) + 1)


def check(op, launch, buffers: Buffers, expected) -> dict[str, float]:
    """Errors of one call on ``buffers`` against ``expected``, the output poisoned first."""
    import torch

    op.poison({"c": buffers.c})
    launch()
    torch.cuda.synchronize()
    return {
        "error": op.error(buffers.c, expected),
        "elementwise_error": elementwise_error(buffers.c, buffers.a, buffers.b, expected),
    }


def calls_for(launch, ms: float) -> int:
    """Calls that fill about ``ms`` milliseconds (3 to 200), from a timed probe call."""
    import torch

    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    launch()
    end.record()
    end.synchronize()
    return max(3, min(200, int(ms / max(start.elapsed_time(end), 1e-3))))


# Clock cycles the GPU sleeps per queued call before a timed batch: 60 µs at 2 GHz, more than any
# launcher here takes on the CPU, so the calls run back to back.
SLEEP_CYCLES_PER_CALL = 120_000


def time_calls(launchers: list, calls: int) -> list[float]:
    """Milliseconds of each of ``calls`` back-to-back calls, rotating over the buffer sets. The
    stream first sleeps on the GPU while the CPU queues every call, so no launch waits for the
    CPU and an event pair times the kernel, not the launcher."""
    import torch

    pairs = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    torch.cuda._sleep(SLEEP_CYCLES_PER_CALL * calls)
    for i, (start, end) in enumerate(pairs):
        start.record()
        launchers[i % len(launchers)]()
        end.record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in pairs]


def percentile(values: list[float], q: float) -> float:
    v = sorted(values)
    x = q * (len(v) - 1)
    lo = math.floor(x)
    return v[lo] + (v[min(lo + 1, len(v) - 1)] - v[lo]) * (x - lo)


def bench_shape(op, shape, impl_names: list[str], rounds: int, ms: float, l2: int) -> list[dict]:
    sets = buffer_sets(op, shape, l2)
    bufs = []
    for _ in range(sets):
        inputs, outputs = op.inputs(shape, "cuda"), op.outputs(shape, "cuda")
        bufs.append(Buffers(shape, inputs, outputs, {}))
    expected = op.reference(bufs[0])["c"]
    rows, launchers = [], {}
    base = {"op": op.name, "shape": op.format_shape(shape), "buffer_sets": sets, "flops": op.flops(shape)}
    for name in impl_names:
        row = {**base, "impl": name}
        rows.append(row)
        try:
            impl = op.impl(name)
            t0 = time.perf_counter()
            fns = [impl.setup(b) for b in bufs]
            row["setup_s"] = round(time.perf_counter() - t0, 2)
            row.update(check(op, fns[0], bufs[0], expected))
            row["passed"] = row["error"] <= op.tolerance() and row["elementwise_error"] <= ELEMENTWISE_TOLERANCE[op.dtype]
            launchers[name] = fns
        except Exception as exc:  # recorded; a CUDA error leaves the context unusable, so stop there
            row["failure"] = f"{type(exc).__name__}: {exc}"[:400]
            print(f"  {name}: {row['failure']}", flush=True)
            if "CUDA" in row["failure"] or "cuda" in row["failure"]:
                raise
    names = list(launchers)
    for name in names:  # warm-up: clocks up, autotuning and lazy loading out of the way
        calls_for(launchers[name][0], 1.0)
    calls = {name: calls_for(launchers[name][0], ms) for name in names}
    for name in names:  # one untimed round: the SM clock up from idle before the first timed one
        time_calls(launchers[name], calls[name])
    samples: dict[str, list[list[float]]] = {n: [] for n in names}
    for rnd in range(rounds):
        order = list(names)
        random.Random(rnd).shuffle(order)  # a new predecessor for every implementation each round
        for name in order:
            samples[name].append(time_calls(launchers[name], calls[name]))
    for row in rows:
        if row["impl"] not in samples:
            continue
        every = [t for r in samples[row["impl"]] for t in r]
        med = statistics.median(every)
        row.update(
            calls=len(every),
            median_ms=round(med, 5),
            p10_ms=round(percentile(every, 0.1), 5),
            p90_ms=round(percentile(every, 0.9), 5),
            round_medians_ms=[round(statistics.median(r), 5) for r in samples[row["impl"]]],
            tflops=round(row["flops"] / med / 1e9, 1),
        )
    control = next((r for r in rows if r["impl"] == "torch" and "median_ms" in r), None)
    for row in rows:
        if control and "median_ms" in row:
            row["vs_cublas"] = round(control["median_ms"] / row["median_ms"], 3)
    return rows


def diagnose(op, name: str, m: int = 128, n: int = 256, k: int = 128) -> dict:
    """Where a wrong implementation takes its values from: C = I B with B coded so that every
    element names its (k, n) (two runs: low and high 4 bits of each, exact in bf16 and TF32),
    then C = A I likewise for A. Returns the share of elements right and up to 12 examples
    ``"C[m,n] <- B[k,n']"``."""
    import torch

    dt = op.torch_dtype()
    out = {}
    for operand in ("b", "a"):
        rows, cols = (k, n) if operand == "b" else (m, k)
        r = torch.arange(rows, device="cuda")[:, None]
        c = torch.arange(cols, device="cuda")[None, :]
        found = []
        for code in ((r % 16) * 16 + c % 16, (r // 16) * 16 + c // 16):
            eye = torch.eye(m if operand == "b" else k, k if operand == "b" else n, device="cuda", dtype=dt)
            coded = code.to(dt)
            a, b = (eye, coded) if operand == "b" else (coded, eye)
            bufs = Buffers((m, n, k), {"a": a, "b": b}, {"c": torch.full((m, n), float("nan"), device="cuda", dtype=dt)}, {})
            op.impl(name).setup(bufs)()
            torch.cuda.synchronize()
            found.append(bufs.c.float().nan_to_num(-1).round().long())
        lo, hi = found
        src_r, src_c = (hi // 16) * 16 + lo // 16, (hi % 16) * 16 + lo % 16
        want_r = (
            torch.arange(m, device="cuda")[:, None].expand(m, n) if operand == "b" else torch.arange(m, device="cuda")[:, None]
        )
        want_c = (
            torch.arange(n, device="cuda")[None, :].expand(m, n) if operand == "b" else torch.arange(k, device="cuda")[None, :]
        )
        if operand == "a":  # C = A I: C[m, j] = A[m, j] for j < k
            src_r, src_c, want_r, want_c = src_r[:, :k], src_c[:, :k], want_r.expand(m, k), want_c.expand(m, k)
        ok = (src_r == want_r) & (src_c == want_c)
        bad = (~ok).nonzero()[:12].tolist()
        out[operand] = {
            "right_share": round(float(ok.float().mean()), 4),
            "examples": [f"C[{i},{j}] <- {operand.upper()}[{int(src_r[i, j])},{int(src_c[i, j])}]" for i, j in bad],
        }
    return out


def triton_choices() -> dict[str, str]:
    """The configuration Triton's autotuner picked for each (M, N, K, ...) key it has seen."""
    try:
        from nsys_tools.kernels.triton_mm import matmul_kernel
    except ImportError:
        return {}
    return {str(key): str(cfg) for key, cfg in getattr(matmul_kernel, "cache", {}).items()}


def table(rows: list[dict]) -> str:
    lines = [f"{'op':12} {'shape':16} {'impl':22} {'ms':>9} {'TFLOP/s':>8} {'xcuBLAS':>7} {'err':>8} {'elem':>8}  rounds"]
    for r in rows:
        if "failure" in r:
            lines.append(f"{r['op']:12} {r['shape']:16} {r['impl']:22} FAILED {r['failure'][:80]}")
            continue
        if "median_ms" not in r:
            continue
        flag = "" if r.get("passed") else "  WRONG"
        lines.append(
            f"{r['op']:12} {r['shape']:16} {r['impl']:22} {r['median_ms']:9.4f} {r['tflops']:8.1f} {r.get('vs_cublas', 0):7.3f} "
            f"{r['error']:8.1e} {r['elementwise_error']:8.1e}  {' '.join(f'{x:.4f}' for x in r['round_medians_ms'])}{flag}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    import torch

    p = argparse.ArgumentParser(prog="python -m nsys_tools.capture.matmul_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--shapes", default="4096x4096x4096,8192x8192x8192,4096x4096x1024,2048x11008x4096")
    p.add_argument("--dtypes", default="bf16,tf32")
    p.add_argument("--impls", default="torch,triton,simt,mma,mma_128x256,wgmma,wgmma_n128")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--ms", type=float, default=60.0, help="milliseconds of calls per implementation and round")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--diagnose", default="", help="implementations whose wrong results to trace to their sources (no timing)")
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    ops = {op.dtype: op for op in OPS}
    props = torch.cuda.get_device_properties(0)
    result = {
        "command": " ".join(["python -m nsys_tools.capture.matmul_bench", *(argv if argv is not None else sys.argv[1:])]),
        "gpu": {"name": props.name, "sm_count": props.multi_processor_count, "l2_bytes": props.L2_cache_size},
        "versions": {"torch": torch.__version__, "cuda": str(torch.version.cuda)},
        "method": (
            "per call: CUDA events around one launch, calls queued behind a GPU sleep and run back to back over "
            "buffer sets past twice the L2; median over rounds x calls; outputs checked against float64 first"
        ),
        "rows": [],
    }
    args.out.mkdir(parents=True, exist_ok=True)
    target = args.out / "matmul-bench.json"
    torch.manual_seed(args.seed)
    if args.diagnose:
        found = {
            f"{ops[d].name}/{name}": diagnose(ops[d], name) for d in args.dtypes.split(",") for name in args.diagnose.split(",")
        }
        (args.out / "matmul-diagnose.json").write_text(json.dumps(found, indent=1))
        print(json.dumps(found, indent=1))
        return
    for dtype in args.dtypes.split(","):
        op = ops[dtype]
        for text in args.shapes.split(","):
            shape = op.parse_shape(text)
            t0 = time.perf_counter()
            rows = bench_shape(op, shape, args.impls.split(","), args.rounds, args.ms, props.L2_cache_size)
            print(f"{op.name} {text}: {time.perf_counter() - t0:.1f}s", flush=True)
            print(table(rows), flush=True)
            result["rows"].extend(rows)
            result["triton_configs"] = triton_choices()
            target.write_text(json.dumps(result, indent=1))
    print("\n" + table(result["rows"]), flush=True)


if __name__ == "__main__":
    main()
