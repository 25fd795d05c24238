"""Explore launch configurations of the register-held kernel with ``triton.testing.do_bench``.

    python -m capture.explore --shapes 4096x768,8192x768,1024x2048,4096x4096 --out DIR

For each shape it times every reasonable ``ln_held`` instantiation (threads per row, rows per
block, cache policy, grid-stride) and the registry's implementations, each checked against a
float64 reference first. ``do_bench`` clears the L2 before every call (cold L2) and reports
the median of CUDA-event times. This picks the dispatcher's table; the committed performance
numbers come from Nsight Systems sweeps, not from here.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from kernels.cuda import Held, Launch, compile_kernels, launcher
from kernels.registry import IMPLS, Problem, parse_shape

from .harness import check


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


def main(argv: list[str] | None = None) -> None:
    import torch
    from triton.testing import do_bench

    p = argparse.ArgumentParser()
    p.add_argument("--shapes", default="4096x768,8192x768,1024x2048,4096x4096")
    p.add_argument("--impls", default=",".join(IMPLS))
    p.add_argument("--out", type=Path, required=True)
    args = p.parse_args(argv)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows = []
    for shape in args.shapes.split(","):
        m, n = parse_shape(shape)
        torch.manual_seed(0)
        prob = Problem(
            torch.randn(m, n, device="cuda"),
            torch.empty(m, n, device="cuda"),
            torch.randn(n, device="cuda"),
            torch.randn(n, device="cuda"),
        )
        cands = held_candidates(m, n, sms)
        t0 = time.perf_counter()
        compile_kernels([launch.kernel for _, launch in cands])
        print(f"{shape}: compiled {len(cands)} configs in {time.perf_counter() - t0:.1f}s", flush=True)
        entries = [(label, launcher(prob, launch), None) for label, launch in cands]
        for name in args.impls.split(","):
            impl = IMPLS[name]
            try:
                entries.append((f"impl {name}", impl.setup(prob), impl))
            except Exception as exc:
                rows.append({"shape": shape, "config": f"impl {name}", "error": str(exc)})
        for label, fn, impl in entries:
            err = check(impl or IMPLS["ours"], fn, prob)
            us = do_bench(fn, warmup=10, rep=40, return_mode="median") * 1000
            rows.append({"shape": shape, "config": label, "median_us": round(us, 3), "rel_err": err})
        best = sorted(
            (r for r in rows if r["shape"] == shape and "median_us" in r and r["rel_err"] < 1e-5), key=lambda r: r["median_us"]
        )
        for r in best[:8]:
            print(f"  {r['median_us']:8.2f} us  {r['config']}", flush=True)
        for r in rows:
            if r["shape"] == shape and r["config"].startswith("impl"):
                print(
                    f"  {r.get('median_us', float('nan')):8.2f} us  {r['config']}  err={r.get('rel_err', r.get('error'))}",
                    flush=True,
                )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "explore.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
