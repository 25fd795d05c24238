"""The op contract: what a plugin author writes against (``Op``, ``Impl``, ``Buffers``, ``lazy``).

Standard library only: the capture side imports this on GPU machines without Polars, and the
analysis side imports it where there is no GPU. Nothing here imports torch; the methods an op
implements do, when the harness calls them. How to write an op, and where plugins come from:
``docs/guides/plugins.md``. Loading plugins is ``nsys_tools.plugin.loader``.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import PluginError, UsageError

SHAPE_TEXT = re.compile(r"^[^/\s]+$")  # what a canonical shape may look like: it is part of an NVTX range
NAME_TEXT = re.compile(r"^[A-Za-z0-9_.+-]+$")  # op and implementation names, likewise

Shape = tuple[int, ...]
Launch = Callable[[], Any]
Factory = Callable[..., Launch]


class UnsupportedShape(UsageError):
    """This implementation cannot run this shape (the message says which limit). Raised by
    ``Impl.check`` from its ``limit``, or by a factory for limits it finds only on the device
    (alignment, shared memory): the harness records it and the other implementations run."""


class Buffers:
    """One buffer set, as a factory receives it: ``buffers.<name>`` for every input, output and
    constant the op made, ``buffers.shape`` (the op's integer tuple), and ``buffers.outputs``
    (the names of the outputs, in the op's order)."""

    def __init__(self, shape: Shape, inputs: Mapping[str, Any], outputs: Mapping[str, Any], constants: Mapping[str, Any]):
        clash = (set(inputs) & set(outputs)) | (set(constants) & (set(inputs) | set(outputs)))
        if clash or {"shape", "outputs", "tensors"} & (set(inputs) | set(outputs) | set(constants)):
            raise PluginError(None, f"buffer names clash or are reserved: {sorted(clash) or 'shape/outputs/tensors'}")
        self.shape = tuple(shape)
        self.outputs = tuple(outputs)
        self.tensors = {**constants, **inputs, **outputs}
        for name, value in self.tensors.items():
            setattr(self, name, value)

    def __repr__(self) -> str:
        return f"Buffers(shape={self.shape}, {', '.join(self.tensors)})"


def arch_number(arch: str) -> int:
    """``"sm_90"`` (or ``"sm_90a"``) -> 90, for ``Impl.compile`` hooks; else ``UsageError``."""
    m = re.fullmatch(r"sm_(\d+)a?", arch)
    if not m:
        raise UsageError(None, f"unknown architecture {arch!r}", "write it as sm_90, sm_89, sm_80, ...")
    return int(m.group(1))


@dataclass
class Cubin:
    """What the census reads (``nsys-tools census``): an implementation compiled for a target
    without a GPU, as it would be launched at a shape. ``Impl.compile(shape, arch)`` returns it;
    raise ``ToolMissing`` (``nsys_tools.errors``) when a compiler is not installed."""

    kernel: str  # the function's (mangled) name in the cubin
    cubin: bytes
    grid: int  # blocks, x * y * z
    block: int  # threads per block
    dynamic_shared_bytes: int = 0  # requested at launch


@dataclass(frozen=True)
class Impl:
    """An implementation of an op.

    ``factory(buffers, **options)`` is called once per buffer set, outside any timed region,
    and returns the launch callable: no arguments, enqueues the work on the current stream,
    returns None after writing ``buffers``' outputs, or (``allocates=True`` only) the new output
    tensor (a tuple of them, in ``buffers.outputs`` order, for several).
    """

    name: str
    factory: Factory
    family: str = "ours"  # "ours" or "control"
    summary: str = ""
    allocates: bool = False  # makes its output inside the call: cannot honour --outputs
    limit: Callable[[Shape], str | None] | None = None  # the reason it cannot run a shape, or None
    options: Mapping[str, Any] = field(default_factory=dict)  # passed to the factory as keywords
    reference: Callable[[Buffers], Any] | None = None  # for an impl that computes something else than the op
    bytes_moved: Callable[[Shape], int | None] | None = None  # likewise, instead of Op.bytes_moved
    flops: Callable[[Shape], int | None] | None = None  # likewise, instead of Op.flops
    compile: Callable[[Shape, str], Cubin] | None = None  # (shape, "sm_90") -> Cubin, for the census; no GPU

    def __post_init__(self) -> None:
        if not NAME_TEXT.match(self.name):
            raise PluginError(
                None, f"implementation name {self.name!r} is not usable in an NVTX range", "use letters, digits, _ . + -"
            )
        if self.family not in ("ours", "control"):
            raise PluginError(None, f"{self.name}: family must be 'ours' or 'control', not {self.family!r}")
        if not callable(self.factory):
            raise PluginError(None, f"{self.name}: its factory {self.factory!r} is not callable")

    def check(self, shape: Shape) -> None:
        """Raise ``UnsupportedShape`` when ``limit`` says this shape cannot run."""
        why = self.limit(shape) if self.limit else None
        if why:
            raise UnsupportedShape(None, f"{self.name}: {why}")

    def setup(self, buffers: Buffers) -> Launch:
        """The launch callable for one buffer set (shape limits checked first)."""
        self.check(buffers.shape)
        launch = self.factory(buffers, **self.options)
        if not callable(launch):
            raise PluginError(None, f"{self.name}: its factory returned {type(launch).__name__}, not a launch callable")
        return launch


def lazy(target: str, **options: Any) -> Factory:
    """A factory that imports ``"module:function"`` at its first call, so that listing or
    validating implementations needs none of the GPU libraries. ``options`` are bound as
    keywords: ``lazy("nsys_tools.kernels.cuda:make", variant="ours")``."""
    module, _, func = target.partition(":")
    if not module or not func:
        raise PluginError(None, f"{target!r} is not module:function")

    def factory(buffers: Buffers, **more: Any) -> Launch:
        return getattr(importlib.import_module(module), func)(buffers, **options, **more)

    factory.__qualname__ = factory.__name__ = f"lazy[{target}]"
    return factory


class Op:
    """An op: override the class attributes and the methods marked *required*.

    Instances must be cheap to create and import no GPU library at construction: the analysis
    side builds them to read names, titles, bytes and FLOPs.
    """

    name: str = ""  # required: the NVTX range's first part, the --op value
    title: str = ""  # for headings (default: name)
    dtype: str = "fp32"  # the precision results are checked at; picks the tolerance
    tolerances: Mapping[str, float] = {"fp64": 1e-12, "fp32": 1e-5, "tf32": 2e-3, "fp16": 2e-3, "bf16": 1.6e-2}
    shape_rank: int = 2  # integers per shape, for the default parse_shape
    shape_hint: str = "MxN"  # how shapes are written, for error messages
    default_shapes: Sequence[str] = ()
    default_impls: Sequence[str] = ()  # a sweep without --impls runs these (default: all of impls())
    control: str | None = None  # the default control: what a sweep compares the others with
    floor: str | None = None  # an implementation that is a bandwidth floor (a copy), or None
    # Dense arithmetic peak at the op's precision, per GPU name as the driver reports it:
    # (TFLOP/s, where the figure comes from). Issue comments give throughput as a share of it.
    peaks: Mapping[str, tuple[float, str]] = {}

    # -- shapes ----------------------------------------------------------------------------
    def parse_shape(self, text: str) -> Shape:
        """``"4096x768"`` -> ``(4096, 768)``; anything else raises ``UsageError``."""
        parts = str(text).strip().lower().replace("×", "x").split("x")
        if len(parts) != self.shape_rank or not all(p.strip().isdigit() and int(p) > 0 for p in parts):
            raise UsageError(
                None, f"unknown {self.name} shape {text!r}", f"write shapes as {self.shape_hint} with positive integers"
            )
        return tuple(int(p) for p in parts)

    def format_shape(self, shape: Shape) -> str:
        return "x".join(str(d) for d in shape)

    def canonical(self, text: str) -> str:
        """The canonical text of a shape, checked usable in an NVTX range and a file name."""
        out = self.format_shape(self.parse_shape(text))
        if not SHAPE_TEXT.match(out):
            raise PluginError(None, f"{self.name}: shape {out!r} holds '/' or whitespace", "format shapes without them")
        return out

    # -- buffers ---------------------------------------------------------------------------
    def constants(self, shape: Shape, device: str) -> dict[str, Any]:
        """Tensors and scalars shared by every buffer set of a shape (weights, eps). Optional."""
        return {}

    def inputs(self, shape: Shape, device: str) -> dict[str, Any]:
        """*Required.* One set of inputs on ``device`` (random, seeded by the harness; never all
        zeros). Called once per buffer set; the sets together exceed twice the L2 when cold."""
        raise NotImplementedError

    def outputs(self, shape: Shape, device: str) -> dict[str, Any]:
        """*Required.* Output tensors, uninitialized: once per set (``--outputs rotate``) or
        once per shape (``reuse``)."""
        raise NotImplementedError

    def poison(self, outputs: Mapping[str, Any]) -> None:
        """Fill outputs so that an element an implementation fails to write fails the check."""
        for t in outputs.values():
            t.fill_(float("nan"))

    # -- correctness -----------------------------------------------------------------------
    def reference(self, buffers: Buffers) -> Mapping[str, Any]:
        """*Required.* ``{output name: expected}``, computed in float64 from ``buffers``' inputs."""
        raise NotImplementedError

    def error(self, out: Any, expected: Any) -> float:
        """How far ``out`` is from ``expected``: relative Frobenius error, inf if non-finite."""
        import torch

        out64 = torch.as_tensor(out).double()
        if not torch.isfinite(out64).all():
            return float("inf")
        return float((out64 - expected).norm() / expected.norm().clamp_min(1e-300))

    def tolerance(self, dtype: str | None = None) -> float:
        """The largest ``error`` accepted for ``dtype`` (default: the op's)."""
        return float(self.tolerances[dtype or self.dtype])

    # -- work ------------------------------------------------------------------------------
    def bytes_moved(self, shape: Shape) -> int | None:
        """The fewest bytes one call must read and write, or None if it has no meaning."""
        return None

    def flops(self, shape: Shape) -> int | None:
        """Floating-point operations of one call (a multiply-add is two), or None."""
        return None

    # -- implementations -------------------------------------------------------------------
    def impls(self) -> Sequence[Impl]:
        """*Required.* The implementations this op ships."""
        raise NotImplementedError

    def impl(self, name: str) -> Impl:
        """The implementation called ``name``. Override to accept families of names (the
        LayerNorm op accepts explicit launch plans such as ``held_t128_r2``)."""
        for impl in self.impls():
            if impl.name == name:
                return impl
        raise UsageError(
            None, f"{self.name} has no implementation {name!r}", f"choose from {', '.join(i.name for i in self.impls())}"
        )

    def work(self, impl: Impl, shape: Shape) -> dict[str, int | None]:
        """``{"bytes": ..., "flops": ...}`` of one call of ``impl``."""
        moved = impl.bytes_moved or self.bytes_moved
        flops = impl.flops or self.flops
        return {"bytes": moved(shape), "flops": flops(shape)}

    def __repr__(self) -> str:
        return f"<op {self.name}>"
