"""Registers, residency and rows in flight of bf16 forward plans and of Liger's kernel, from
their codegen alone (sm_90, no GPU), at the shapes where the bf16 forward trails a control.

    python3 probes/bf16_plans_census.py 4096x4096,1024x3584,24576x896 > reports/probes/bf16-plans-census.md

Ours: the rule's plan (``ours``) and explicit plans (``fwd_...``, converting bf16 by single
instructions, ``_c``) through the forward's census hook. Liger: its installed
``_layer_norm_forward_kernel`` (Liger-Kernel 0.8.5), compiled by ``triton.compile`` with Liger's
launch settings (``BLOCK_SIZE`` the next power of two of N; 4 warps, 8 from 2048, 16 from 8192)
for bf16 rows, read from the installed file so that the probe needs no torch. Resident blocks
per SM are the fewest of: 32 blocks, 2048 threads, and the 65,536 registers at 256 per warp
granule; rows in flight per SM count one row per row group of a resident block, x bytes in
flight per SM those rows' bytes.
"""

from __future__ import annotations

import ast
import importlib.util
import linecache
import math
import sys
from pathlib import Path

from nsys_tools.kernels.layernorm_bf16 import OP
from nsys_tools.kernels.train_cuda import forward_plan
from nsys_tools.study.census import resources, sass_counts

SMS = 132


def resident(threads: int, registers: int) -> int:
    warps = math.ceil(threads / 32)
    per_warp = math.ceil(registers * 32 / 256) * 256
    return min(32, 2048 // threads, 65536 // (warps * per_warp))


def liger_kernel():
    """Liger's forward kernel as a Triton JIT function, from the installed file (no torch import)."""
    import triton
    import triton.language as tl
    from triton.language.extra.cuda.libdevice import rsqrt

    spec = importlib.util.find_spec("liger_kernel")
    path = Path(next(iter(spec.submodule_search_locations))) / "ops" / "layer_norm.py"
    tree = ast.parse(path.read_text())
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "_layer_norm_forward_kernel")
    source = ast.get_source_segment(path.read_text(), fn)
    name = f"<liger {path}>"
    linecache.cache[name] = (len(source), None, source.splitlines(True), name)
    scope = {"triton": triton, "tl": tl, "rsqrt": rsqrt}
    exec(compile(source, name, "exec"), scope)
    return triton.jit(scope["_layer_norm_forward_kernel"]), triton


def liger_cubin(n: int):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    kernel, triton = liger_kernel()
    block = triton.next_power_of_2(n)
    warps = 32 if block >= 32768 else 16 if block >= 8192 else 8 if block >= 2048 else 4
    ptrs = {"Y_ptr": "*bf16", "X_ptr": "*bf16", "W_ptr": "*bf16", "B_ptr": "*bf16", "Mean_ptr": "*fp32", "RSTD_ptr": "*fp32"}
    strides = {"Y_row_stride": n, "X_row_stride": n, "W_row_stride": 1, "B_row_stride": 1, "Mean_row_stride": 1}
    strides |= {"RSTD_row_stride": 1, "n_cols": n}
    signature = {**ptrs, **{k: ("constexpr" if v == 1 else "i32") for k, v in strides.items()}, "eps": "fp32"}
    signature["BLOCK_SIZE"] = "constexpr"
    constexprs = {"BLOCK_SIZE": block, **{k: 1 for k, v in strides.items() if v == 1}}
    names = kernel.arg_names
    aligned = [*ptrs, *(k for k, v in strides.items() if v % 16 == 0)]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn=kernel, signature=signature, constexprs=constexprs, attrs=attrs)
    compiled = triton.compile(src, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps})
    return compiled.metadata.name, compiled.asm["cubin"], warps * 32


def row(shape: str, label: str, kernel: str, cubin: bytes, threads: int, rows_per_block: int, n: int) -> str:
    r, q = resources(cubin, kernel, "sm_90"), sass_counts(cubin, kernel)
    blocks = resident(threads, r["registers"])
    rows = blocks * rows_per_block
    return (
        f"| {shape} | {label} | {threads} | {r['registers']} | {r['local_bytes']} | {blocks} | {blocks * threads} | "
        f"{rows} | {rows * n * 2 // 1024} | {q['ld_global_128']} | {q['instructions']} |"
    )


def main(shapes: list[str]) -> None:
    print("| shape | kernel | threads | registers | local B | blocks/SM | threads/SM | rows in flight/SM | x KB in flight/SM "
          "| ld.128 | SASS |")  # fmt: skip
    print("|---|---|" + "---:|" * 9)
    for shape in shapes:
        m, n = (int(v) for v in shape.split("x"))
        fixed = "_f" if n * 2 <= 8192 else ""
        names = ["ours"] + [f"fwd_t{t}_r{max(1, 128 // t)}_p{p}{fixed}_c" for t in (32, 64, 128, 256, 512, 1024) for p in (1, 0)]
        for name in names:
            try:
                launch = forward_plan(m, n, "bf16", n % 8 == 0, named="" if name == "ours" else name)
            except Exception:
                continue
            vec = 8 if n % 8 == 0 else 1
            tpr = int(launch.kernel.split(",")[1])
            if name != "ours" and tpr > 32 and tpr // 2 * vec >= n:  # half the threads would hold nothing
                continue
            c = OP.impl(name).compile((m, n), "sm_90")
            rpb = int(launch.kernel.split(",")[4])
            label = f"{name} `{launch.kernel}`" if name == "ours" else name
            print(row(shape, label, c.kernel, c.cubin, c.block, rpb, n))
        kernel, cubin, threads = liger_cubin(n)
        print(row(shape, "liger", kernel, cubin, threads, 1, n))


if __name__ == "__main__":
    main(sys.argv[1].split(","))
