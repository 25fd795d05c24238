"""The codegen census: what the compiler made of each kernel, without a GPU.

Each implementation that can be compiled without a GPU brings a ``compile(shape, arch)`` hook
(``nsys_tools.plugin.Impl.compile``) returning a cubin built as its launcher would build it for
that shape. Each cubin is read with ``cuobjdump`` (Triton's package ships one): resource usage,
and counts of SASS instructions by kind. A capture of the same shape, where there is one,
cross-checks the registers, shared memory and launch configuration the GPU actually ran with.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import polars as pl

from ..errors import NsysToolsError, ToolMissing, UsageError
from ..plugin.api import Cubin, Impl, Op, arch_number

__all__ = ["ToolMissing", "census", "cross_check", "markdown"]


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
    if arch_number(arch) >= 80 and shared >= SYSTEM_SHARED:
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


def compile_impl(impl: Impl, shape: tuple[int, ...], arch: str) -> Cubin:
    """``impl`` compiled for ``arch`` at ``shape``, through its census hook."""
    impl.check(shape)
    if impl.compile is None:
        raise UsageError(
            None, f"{impl.name} cannot be compiled without a GPU (a library kernel, or no census hook)", "census the others"
        )
    return checked_launch(impl.name, shape, impl.compile(shape, arch))


# CUDA's launch limits (compute capability 5.0 and later): threads per block, and blocks per
# grid (x up to 2**31 - 1, y and z up to 65535).
MAX_BLOCK_THREADS = 1024
MAX_GRID_BLOCKS = (2**31 - 1) * 65535 * 65535


def checked_launch(name: str, shape: tuple[int, ...], c: Cubin) -> Cubin:
    """``c`` if its launch configuration is one CUDA can launch, else ``UsageError`` naming the limit."""
    where = f"{name} at {'x'.join(map(str, shape))}"
    if not isinstance(c.block, int) or not 1 <= c.block <= MAX_BLOCK_THREADS:
        raise UsageError(None, f"{where}: a block of {c.block} threads is outside CUDA's 1 to {MAX_BLOCK_THREADS}")
    if not isinstance(c.grid, int) or not 1 <= c.grid <= MAX_GRID_BLOCKS:
        raise UsageError(None, f"{where}: a grid of {c.grid} blocks is outside CUDA's 1 to (2^31-1)·65535·65535")
    if not isinstance(c.dynamic_shared_bytes, int) or c.dynamic_shared_bytes < 0:
        raise UsageError(None, f"{where}: dynamic shared memory of {c.dynamic_shared_bytes} bytes is not a size")
    return c


def census(op: Op, shape: str, impls: list[Impl], arch: str = "sm_90") -> pl.DataFrame:
    """One row per implementation: launch configuration, resources and instruction counts."""
    dims = op.parse_shape(shape)
    arch_number(arch)
    rows = []
    for impl in impls:
        c = compile_impl(impl, dims, arch)
        rows.append(
            {
                "impl": impl.name,
                "kernel": c.kernel,
                "shape": op.format_shape(dims),
                "dtype": op.dtype,
                "arch": arch,
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
    from ..read.trace import open as open_trace
    from .folder import is_sweep, timed_ops

    shape = table["shape"][0]
    path = capture / f"{shape}.sqlite" if is_sweep(capture) else capture
    with open_trace(path) as trace:
        ops = timed_ops(trace, ["kind", "registers_per_thread", "static_shared_bytes", "grid_x", "block_x"])
    found = (
        ops.filter((pl.col("kind") == "kernel") & (pl.col("shape") == shape))
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
    from ..render.tables import escape, grid, shorten

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
    shape, dtype, arch = table["shape"][0], table["dtype"][0], table["arch"][0]
    head = ["Property", *(escape(r["impl"]) for r in rows)]
    body = [[label, *(escape(fn(r)) for r in rows)] for label, fn in props]
    return f"Codegen census, {shape} {dtype}, compiled for {arch}:\n\n" + grid(head, body)


def _demangle_hint(name: str) -> str:
    """``_Z7ln_heldILi32ELi6E...`` -> ``ln_held<32,6,...>``: enough to tell instantiations apart."""
    m = re.match(r"_Z(\d+)(\w+?)I(.*)E.*$", name)
    if not m or len(m.group(2)) < int(m.group(1)):
        return name
    base = m.group(2)[: int(m.group(1))]
    args = re.findall(r"Li(-?\d+)E", m.group(3))
    return f"{base}<{','.join(args)}>" if args else base
