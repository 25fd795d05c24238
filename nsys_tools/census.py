"""The codegen census: what the compiler made of each kernel, without a GPU.

Our CUDA C++ goes through NVRTC (``cuda.bindings``) to a cubin for the target, with the options
and template instantiation the launcher uses; Triton's kernel goes through ``triton.compile``
for the target, specialized the way Triton's launcher would specialize it for that shape
(16-byte aligned pointers and integers divisible by 16 marked ``tt.divisibility=16``). Each
cubin is read with ``cuobjdump`` (Triton's package ships one): resource usage, and counts of
SASS instructions by kind. A capture of the same shape, where there is one, cross-checks the
registers, shared memory and launch configuration the GPU actually ran with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from .errors import NsysToolsError, ToolMissing, UsageError


@dataclass
class Compiled:
    impl: str
    kernel: str  # the function's (mangled) name in the cubin
    cubin: bytes
    grid: int
    block: int
    dynamic_shared_bytes: int = 0  # requested at launch


def _arch_number(arch: str) -> int:
    m = re.fullmatch(r"sm_(\d+)a?", arch)
    if not m:
        raise UsageError(None, f"unknown architecture {arch!r}", "write it as sm_90, sm_89, sm_80, ...")
    return int(m.group(1))


def compile_ours(variant: str, m: int, n: int, arch: str) -> Compiled:
    """NVRTC: ``kernels/layernorm.cu`` with the launcher's options and instantiation, to a cubin."""
    from kernels.cuda import NVRTC_OPTIONS, SOURCE, launch_config, nvrtc_cubin

    plan = launch_config(variant, m, n, vec=4 if n % 4 == 0 else 1, arch=_arch_number(arch))
    lowered, cubin = nvrtc_cubin(SOURCE, plan.kernel, NVRTC_OPTIONS, arch)
    return Compiled(variant, lowered, cubin, plan.grid, plan.block, plan.shared_bytes)


def compile_triton(m: int, n: int, arch: str) -> Compiled:
    """``triton.compile`` of the control for ``arch``, specialized as its launcher would be."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as exc:
        raise ToolMissing(None, "Triton is not installed", "pip install 'nsys-tools[census]'") from exc
    from kernels.triton_ln import launch_params, layer_norm_fwd

    block, warps = launch_params(n)
    pointers = ["X", "Y", "W", "B", "Mean", "Rstd"]
    ints = {"stride_x": n, "stride_y": n, "N": n}  # contiguous rows, as the harness allocates them
    signature = {**dict.fromkeys(pointers, "*fp32"), **dict.fromkeys(ints, "i32"), "eps": "fp32", "BLOCK": "constexpr"}
    constexprs = {"BLOCK": block, **{k: 1 for k, v in ints.items() if v == 1}}
    signature.update({k: "constexpr" for k, v in ints.items() if v == 1})
    names = layer_norm_fwd.arg_names
    aligned = pointers + [k for k, v in ints.items() if v % 16 == 0]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn=layer_norm_fwd, signature=signature, constexprs=constexprs, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", _arch_number(arch), 32), options={"num_warps": warps})
    return Compiled("triton", kernel.metadata.name, kernel.asm["cubin"], m, warps * 32, kernel.metadata.shared)


def cuobjdump() -> str:
    """``$CUOBJDUMP``, then the copy inside Triton's package, then PATH."""
    candidates = [os.environ.get("CUOBJDUMP")]
    try:
        import triton

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / "cuobjdump"))
    except ImportError:
        pass
    candidates.append(shutil.which("cuobjdump"))
    for c in candidates:
        if c and Path(c).is_file() and os.access(c, os.X_OK):
            return c
    raise ToolMissing(None, "cuobjdump was not found", "install Triton (it ships one), set $CUOBJDUMP, or put CUDA's on PATH")


def _dump(cubin: bytes, flag: str) -> str:
    with tempfile.NamedTemporaryFile(suffix=".cubin") as fh:
        fh.write(cubin)
        fh.flush()
        done = subprocess.run([cuobjdump(), flag, fh.name], capture_output=True, text=True)
    if done.returncode != 0:
        raise NsysToolsError(None, f"cuobjdump {flag} failed: {done.stderr.strip()[:200]}")
    return done.stdout


def _function_text(text: str, function: str, header: str) -> str:
    """The part of a cuobjdump listing that belongs to ``function``."""
    parts = re.split(header, text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name.strip() == function:
            return body
    raise NsysToolsError(None, f"{function} is not in the cubin")


SYSTEM_SHARED = 1024  # sm_80 and later reserve 1 KB in every block that uses shared memory


def resources(cubin: bytes, function: str, arch: str) -> dict[str, int]:
    """Registers, static shared memory, local memory and stack of ``function`` (cuobjdump -res-usage)."""
    body = _function_text(_dump(cubin, "-res-usage"), function, r"Function ([^:\s]+):")
    fields = {k: int(v) for k, v in re.findall(r"(\w+):(\d+)", body.split("\n", 2)[1] if "\n" in body else body)}
    shared = fields["SHARED"]
    if _arch_number(arch) >= 80 and shared >= SYSTEM_SHARED:
        shared -= SYSTEM_SHARED
    return {"registers": fields["REG"], "shared_bytes": shared, "local_bytes": fields["LOCAL"], "stack_bytes": fields["STACK"]}


# An instruction's opcode after its address and optional predicate; "@!PT" (never executed:
# padding ptxas puts beside asynchronous copies) is left out.
OPCODE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?!@!PT\s)(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def _width(opcode: str) -> int:
    for w in (128, 64):
        if f".{w}" in opcode:
            return w
    return 16 if re.search(r"\.[US]16", opcode) else 8 if re.search(r"\.[US]8", opcode) else 32


def sass_counts(cubin: bytes, function: str) -> dict[str, object]:
    """Counts of SASS instructions by kind: global loads and stores by width, barriers, warp
    shuffles, special-function (MUFU) operations, local-memory traffic, tensor-core
    instructions (HMMA: mma.sync; HGMMA: sm_90 wgmma)."""
    ops = OPCODE.findall(_function_text(_dump(cubin, "-sass"), function, r"\n\s*Function : (\S+)"))
    out: dict[str, object] = {f"{k}_{w}": 0 for k in ("ld_global", "st_global") for w in (32, 64, 128)}
    out.update(barriers=0, shuffles=0, mufu=0, ld_local=0, st_local=0, spill_store_bytes=0, ld_shared=0, st_shared=0)
    out.update(hmma=0, hgmma=0)
    mufu: dict[str, int] = {}
    for op in ops:
        head = op.split(".")[0]
        if head in ("LDG", "STG"):
            key = f"{'ld' if head == 'LDG' else 'st'}_global_{_width(op)}"
            if key in out:
                out[key] += 1
        elif head == "BAR":
            out["barriers"] += 1
        elif head == "SHFL":
            out["shuffles"] += 1
        elif head == "MUFU":
            out["mufu"] += 1
            mufu[op] = mufu.get(op, 0) + 1
        elif head in ("LDL", "STL"):
            out["ld_local" if head == "LDL" else "st_local"] += 1
            if head == "STL":
                out["spill_store_bytes"] += _width(op) // 8
        elif head in ("LDS", "STS"):
            out["ld_shared" if head == "LDS" else "st_shared"] += 1
        elif head in ("HMMA", "HGMMA"):
            out[head.lower()] += 1
    out["special"] = ", ".join(f"{k}×{v}" for k, v in sorted(mufu.items()))
    out["instructions"] = len(ops)
    return out


def compile_impl(impl: str, m: int, n: int, arch: str) -> Compiled:
    from kernels.registry import get

    entry = get(impl)
    entry.check(m, n)
    if impl == "triton":
        return compile_triton(m, n, arch)
    if entry.factory == "kernels.cuda:make":
        return compile_ours(impl, m, n, arch)
    raise UsageError(
        None, f"the census compiles ours and triton; {impl} is a library kernel", "choose from ours, its variants, triton"
    )


def census(shape: str, impls: list[str], arch: str = "sm_90") -> pl.DataFrame:
    """One row per implementation: launch configuration, resources and instruction counts."""
    from kernels.registry import format_shape, parse_shape

    m, n = parse_shape(shape)
    _arch_number(arch)
    rows = []
    for impl in impls:
        c = compile_impl(impl, m, n, arch)
        rows.append(
            {
                "impl": impl,
                "kernel": c.kernel,
                "shape": format_shape(m, n),
                "arch": arch,
                "grid": c.grid,
                "block": c.block,
                "dynamic_shared_bytes": c.dynamic_shared_bytes,
                **resources(c.cubin, c.kernel, arch),
                **sass_counts(c.cubin, c.kernel),
            }
        )
    return pl.DataFrame(rows)


def census_op(op, shape: str, impls: list[str], arch: str = "sm_90") -> pl.DataFrame:
    """The census of a plugin op's implementations (``nsys_tools.plugin``), each compiled by its
    ``Impl.compile`` hook; one row per implementation, as ``census``."""
    dims = op.parse_shape(shape)
    _arch_number(arch)
    rows = []
    for name in impls:
        impl = op.impl(name)
        if impl.compile is None:
            raise UsageError(None, f"{op.name}: {name} has no compile hook (a library kernel?)", "choose implementations the census can compile")
        c = impl.compile(dims, arch)
        rows.append(
            {
                "impl": name,
                "kernel": c.kernel,
                "shape": op.format_shape(dims),
                "arch": arch,
                "dtype": op.dtype,
                "grid": c.grid,
                "block": c.block,
                "dynamic_shared_bytes": c.dynamic_shared_bytes,
                **resources(c.cubin, c.kernel, arch),
                **sass_counts(c.cubin, c.kernel),
            }
        )
    return pl.DataFrame(rows)


def cross_check(table: pl.DataFrame, capture: Path) -> pl.DataFrame:
    """Add what the trace recorded for each implementation at the shape (registers, static shared
    memory, grid, block) and a ``disagrees`` list naming every field that differs."""
    from . import attribute, events
    from .export import open_export
    from .sweep import RANGE_REGEX, is_sweep, parse_ranges

    shape = table["shape"][0]
    path = capture / f"{shape}.sqlite" if is_sweep(capture) else capture
    ex = open_export(path)
    cols = [*events.launch_keys(ex), "registers_per_thread", "static_shared_bytes", "grid_x", "block_x"]
    ops = events.kernels(ex).select(cols)
    found = (
        attribute.project(ops, events.launch_calls(ex, ops), events.nvtx_ranges(ex))
        .filter(pl.col("range").str.contains(RANGE_REGEX))
        .collect()
        .pipe(parse_ranges)
        .filter(pl.col("shape") == shape)
        .group_by("impl")
        .agg(
            trace_registers=pl.col("registers_per_thread").mode().first(),
            trace_shared_bytes=pl.col("static_shared_bytes").mode().first(),
            trace_grid=pl.col("grid_x").mode().first(),
            trace_block=pl.col("block_x").mode().first(),
        )
    )
    out = table.join(found, on="impl", how="left")
    pairs = {"registers": "trace_registers", "shared_bytes": "trace_shared_bytes", "grid": "trace_grid", "block": "trace_block"}
    differs = [pl.when(pl.col(b).is_not_null() & (pl.col(a) != pl.col(b))).then(pl.lit(a)) for a, b in pairs.items()]
    return out.with_columns(disagrees=pl.concat_list(differs).list.drop_nulls().list.join(", "))


PROPERTIES = (
    ("Kernel", lambda r: r["short"]),
    ("Grid × block", lambda r: f"{r['grid']} × {r['block']}"),
    ("Registers per thread", lambda r: str(r["registers"])),
    ("Shared memory, static + dynamic", lambda r: f"{r['shared_bytes']} + {r['dynamic_shared_bytes']} bytes"),
    ("Local memory, spill stores", lambda r: f"{r['local_bytes']} bytes, {r['st_local']} STL ({r['spill_store_bytes']} bytes)"),
    ("Global loads 128 / 64 / 32-bit", lambda r: f"{r['ld_global_128']} / {r['ld_global_64']} / {r['ld_global_32']}"),
    ("Global stores 128 / 64 / 32-bit", lambda r: f"{r['st_global_128']} / {r['st_global_64']} / {r['st_global_32']}"),
    ("Barriers", lambda r: str(r["barriers"])),
    ("Warp shuffles", lambda r: str(r["shuffles"])),
    ("Special-function ops", lambda r: r["special"] or "none"),
    ("SASS instructions", lambda r: str(r["instructions"])),
)


def markdown(table: pl.DataFrame) -> str:
    """The census as the seed thread's table: one row per property, one column per kernel."""
    from .tables import escape, shorten

    rows = table.to_dicts()
    for r in rows:
        r["short"] = shorten(_demangle_hint(r["kernel"]))
    props = list(PROPERTIES)
    if "trace_registers" in table.columns:
        props.append(
            (
                "Trace cross-check",
                lambda r: (
                    "no capture of this impl"
                    if r["trace_registers"] is None
                    else f"disagrees: {r['disagrees']} (trace: {r['trace_registers']} registers, "
                    f"{r['trace_shared_bytes']} B shared, {r['trace_grid']} × {r['trace_block']})"
                    if r["disagrees"]
                    else "agrees (registers, shared memory, grid, block)"
                ),
            )
        )
    if any(r["hmma"] or r["hgmma"] for r in rows):
        at = [label for label, _ in props].index("SASS instructions")
        props.insert(at, ("Tensor-core instructions HMMA / HGMMA", lambda r: f"{r['hmma']} / {r['hgmma']}"))
    shape, arch = table["shape"][0], table["arch"][0]
    precision = table["dtype"][0] if "dtype" in table.columns else "fp32"
    head = "| Property | " + " | ".join(escape(r["impl"]) for r in rows) + " |"
    lines = [f"Codegen census, {shape} {precision}, compiled for {arch}:", "", head, "|---|" + "---|" * len(rows)]
    for label, fn in props:
        lines.append(f"| {label} | " + " | ".join(escape(fn(r)) for r in rows) + " |")
    return "\n".join(lines) + "\n"


def _demangle_hint(name: str) -> str:
    """``_Z7ln_heldILi32ELi6E...`` -> ``ln_held<32,6,...>``: enough to tell instantiations apart."""
    m = re.match(r"_Z(\d+)(\w+?)I(.*)E.*$", name)
    if not m or len(m.group(2)) < int(m.group(1)):
        return name
    base = m.group(2)[: int(m.group(1))]
    args = re.findall(r"Li(-?\d+)E", m.group(3))
    return f"{base}<{','.join(args)}>" if args else base
