"""Ops and implementations: the interface between nsys-tools and the kernels it measures.

Standard library only: the capture side imports this on GPU machines without Polars, and the
analysis side imports it where there is no GPU. Nothing here imports torch; the methods an op
implements do, when the harness calls them.

An **op** is a computation with a float64 reference: LayerNorm, a matmul in one precision, a
softmax. It owns its shapes, how to build one set of device buffers for a shape, the reference
and tolerance its outputs are checked against, the bytes and FLOPs one call must move and do,
and its implementations. An **implementation** is a factory: given one buffer set (and its
options), it does every allocation, compilation and argument conversion up front and returns a
launch callable taking no arguments, which the harness times.

Writing an op (the full example is ``examples/softmax_op.py``)::

    from nsys_tools.plugin import Impl, Op, lazy

    class Softmax(Op):
        name = "softmax"               # the first part of every NVTX range; no "/"
        title = "Softmax"              # for headings
        default_shapes = ("4096x1000", "8192x4096")
        control = "torch"              # what the others are compared with by default
        floor = "copy"                 # a bandwidth floor among the impls, or None

        def inputs(self, shape, device):
            import torch
            m, n = shape
            return {"x": torch.randn(m, n, device=device)}

        def outputs(self, shape, device):
            import torch
            return {"y": torch.empty(shape, device=device)}

        def reference(self, buffers):
            return {"y": buffers.x.double().softmax(-1)}

        def bytes_moved(self, shape):
            return 2 * shape[0] * shape[1] * 4

        def impls(self):
            return [
                Impl("mine", lazy("my_kernels:make_softmax"), summary="one warp per row"),
                Impl("torch", lazy("my_kernels:make_torch"), family="control", allocates=True),
            ]

    OPS = [Softmax()]

Where plugins come from (``Registry``):

- ``--plugin path/to/file.py`` or ``--plugin pkg.module``: the module's ``OPS`` (a list of ``Op``
  instances, or ``OP`` for one) and ``IMPLS`` (``{op name: [Impl, ...]}``, implementations added
  to an op defined elsewhere, e.g. your kernel beside the built-in LayerNorm's controls);
- ``--impls ours,triton,pkg.module:make_mine``: an entry with a colon names a factory directly.
  The object may be an ``Impl`` (used as it is) or a plain factory function (an ``ours``
  implementation named after the function; ``name=pkg.module:function`` names it);
- installed packages, through the entry-point group ``nsys_tools.ops``: each entry points at a
  module (read as a ``--plugin`` module) or at one ``Op`` instance. The built-in LayerNorm is
  registered this way (``nsys_tools.kernels.layernorm``), and so is any op a package ships::

      [project.entry-points."nsys_tools.ops"]
      softmax = "my_package.ops:OPS_MODULE_OR_OP"

**Shapes** are strings the op defines: ``MxN`` for LayerNorm, ``MxNxK`` for matmul. They appear
in NVTX ranges (``<op>/<impl>/<shape>/<l2>/r<round>``) and file names, so they may hold no
``/`` and no whitespace. ``Op.parse_shape`` turns text into a tuple of integers (``shape``
everywhere below), ``Op.format_shape`` back into the canonical text; the defaults read
``shape_rank`` positive integers separated by ``x``.

**Buffer sets and the output policy.** For a cold L2 the harness builds several buffer sets per
shape and rotates the calls over them: ``Op.inputs`` is called once per set; ``Op.constants``
(weights, scalars) once per shape, shared by every set. ``Op.outputs`` is called once per set
under ``--outputs rotate`` (every write lands in a cold buffer), once per shape under
``--outputs reuse`` (every implementation writes the same buffers, as a caller whose caching
allocator hands the freed block back would see). One set's inputs, outputs and constants reach
a factory together as a ``Buffers`` object: attribute access by name (``buffers.x``), plus
``buffers.shape`` (the integer tuple). An implementation that allocates its output inside the
call (``Impl(allocates=True)``, e.g. ``torch.nn.functional.layer_norm``) cannot honour the
policy: it returns its output from the launch callable instead of writing ``buffers``, and
every table of the report marks it.

**Correctness.** Before timing, each implementation runs once on the first set, its outputs
poisoned first (``Op.poison``: NaN); every output is compared with ``Op.reference`` (computed in
float64 from the same buffers) by ``Op.error`` (relative Frobenius error by default) and must
stay under ``Op.tolerance(dtype)``.

**One precision per op.** An op checks at one ``dtype`` (``Op.tolerances`` maps each precision
to the largest relative error accepted). A computation offered in several precisions is several
ops, usually instances of one class: the matmul ships as ``matmul_bf16`` and ``matmul_tf32``
(shapes ``MxNxK``, ``shape_rank = 3``), so that a range, a control, a ledger band and a ratio
never mix precisions.

**Families.** ``family="ours"`` marks the implementations under study, ``"control"`` the tuned
baselines they are compared with in the same session. The report follows the first ``ours``
implementation against the control across sessions.

**The census.** An implementation whose code can be compiled without a GPU sets ``compile``:
``nsys-tools census`` then counts registers, shared memory, loads, stores, barriers and shuffles
in its cubin, and cross-checks them against a capture.

**Bytes and FLOPs** per call are the op's (``Op.bytes_moved``, ``Op.flops``, the fewest an
implementation must move and do); an implementation that computes something else (a copy as
the bandwidth floor) overrides them and the reference through its own ``Impl`` fields. The
harness records both per implementation, so reports need no plugin to show GB/s and TFLOP/s.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import Any

from .errors import PluginError, UsageError

OPS_GROUP = "nsys_tools.ops"
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


# -- loading ---------------------------------------------------------------------------------


def _import_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise PluginError(path, "no such plugin file", "give a .py file or an importable module")
    stem = re.sub(r"\W", "_", path.stem)
    name = f"nsys_tools_plugin_{stem}_{zlib.crc32(str(path).encode()):08x}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise PluginError(
            path, f"failed to import: {type(exc).__name__}: {exc}", "run it with python to see the traceback"
        ) from exc
    return module


def _shipped(name: str) -> str:
    """Captures made before the shipped studies were installed under ``nsys_tools`` name them
    ``kernels.<module>`` (``--plugin kernels.matmul``): where we ship that module, it is ours."""
    if name.partition(".")[0] in ("kernels", "capture") and "." in name:
        import importlib.util

        try:
            if importlib.util.find_spec(f"nsys_tools.{name}") is not None:
                return f"nsys_tools.{name}"
        except ImportError:
            pass
    return name


def _import_module(name: str, source: str | Path) -> ModuleType:
    try:
        return importlib.import_module(_shipped(name))
    except ImportError as exc:
        raise PluginError(source, f"cannot import {name!r} ({exc})", "install it, or put its folder on PYTHONPATH") from exc
    except Exception as exc:
        raise PluginError(
            source, f"failed to import: {type(exc).__name__}: {exc}", "run it with python to see the traceback"
        ) from exc


def is_file_spec(spec: str) -> bool:
    return spec.endswith(".py") or "/" in spec or Path(spec).is_file()


def resolve(target: str) -> Any:
    """The object ``module:attribute`` (or ``path.py:attribute``) names."""
    where, sep, attr = target.rpartition(":")
    if not sep or not where or not attr:
        raise PluginError(None, f"{target!r} is not module:attribute", "write pkg.module:factory or file.py:factory")
    module = _import_file(Path(where).resolve()) if is_file_spec(where) else _import_module(where, where)
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(where, f"has no {attr!r}", f"define {attr} there, or check the spelling")
        obj = getattr(obj, part)
    return obj


def installed_entry_points() -> list:
    """The ``nsys_tools.ops`` entry points of every installed distribution. Run from a source
    checkout that was never installed (a GPU machine without the analysis stack), the checkout's
    own ``pyproject.toml`` declares those of nsys-tools itself."""
    from importlib.metadata import EntryPoint, PackageNotFoundError, distribution, entry_points

    found = list(entry_points(group=OPS_GROUP))
    try:
        distribution("nsys-tools")
        return found
    except PackageNotFoundError:
        pass
    import tomllib

    pyproject = Path(__file__).resolve().parents[1] / "pyproject.toml"
    try:
        project = tomllib.loads(pyproject.read_text()).get("project", {})
    except (OSError, tomllib.TOMLDecodeError):
        return found
    if project.get("name") != "nsys-tools":
        return found
    declared = project.get("entry-points", {}).get(OPS_GROUP, {})
    return found + [EntryPoint(name, value, OPS_GROUP) for name, value in declared.items()]


class Registry:
    """The ops known here: the entry-point group's, then each ``--plugin``'s (a later definition
    of a name replaces an earlier one). ``sources`` lists what was loaded, absolute, so that a
    harness in another process and folder loads exactly the same."""

    def __init__(self, plugins: Iterable[str] = (), *, entry_points: bool = True):
        self.ops: dict[str, Op] = {}
        self.extra: dict[str, dict[str, Impl]] = {}
        self.sources: list[str] = []
        # The modules loaded, entry points' included: what a folder naming a plugin finds loaded.
        self.modules: set[str] = set()
        if entry_points:
            self._entry_points()
        for spec in plugins:
            self.add_plugin(spec)

    def _entry_points(self) -> None:
        for ep in sorted(installed_entry_points(), key=lambda e: e.name):
            try:
                obj = ep.load()
            except Exception as exc:
                raise PluginError(
                    None, f"entry point {ep.name} = {ep.value} failed to load: {type(exc).__name__}: {exc}"
                ) from exc
            self._take(obj, f"entry point {ep.value}")
            self.modules.add(ep.module)

    def add_plugin(self, spec: str) -> None:
        """Load ``spec``: a ``.py`` file or an importable module, read for ``OPS``/``OP``/``IMPLS``."""
        if is_file_spec(spec):
            path = Path(spec).resolve()
            module, source = _import_file(path), str(path)
        else:
            module, source = _import_module(spec, spec), spec
        if not self._take(module, source):
            raise PluginError(source, "defines no OPS, OP or IMPLS", "see the plugin interface in nsys_tools/plugin.py")
        self.sources.append(source)

    def _take(self, obj: Any, source: str) -> bool:
        if isinstance(obj, Op):
            self._add_op(obj, source)
            return True
        ops = list(getattr(obj, "OPS", [])) + ([obj.OP] if hasattr(obj, "OP") else [])
        for op in ops:
            self._add_op(op, source)
        extra = getattr(obj, "IMPLS", None) if isinstance(obj, ModuleType) else None
        if isinstance(extra, Mapping):
            for op_name, impls in extra.items():
                for impl in impls:
                    if not isinstance(impl, Impl):
                        raise PluginError(source, f"IMPLS[{op_name!r}] holds {impl!r}, not an Impl")
                    self.extra.setdefault(op_name, {})[impl.name] = impl
        return bool(ops) or isinstance(extra, Mapping)

    def _add_op(self, op: Any, source: str) -> None:
        if not isinstance(op, Op):
            raise PluginError(source, f"OPS holds {op!r}, not an nsys_tools.plugin.Op")
        if not op.name or not NAME_TEXT.match(op.name):
            raise PluginError(source, f"op name {op.name!r} is not usable in an NVTX range", "use letters, digits, _ . + -")
        self.ops[op.name] = op

    def op(self, name: str | None = None) -> Op:
        """The op called ``name``; without a name, the only op known (else ``UsageError``)."""
        if not name:
            if len(self.ops) != 1:
                known = ", ".join(sorted(self.ops)) or "none"
                raise UsageError(None, f"choose an op with --op (known: {known})", "or load yours with --plugin")
            return next(iter(self.ops.values()))
        if name not in self.ops:
            known = ", ".join(sorted(self.ops)) or "none"
            raise UsageError(
                None, f"unknown op {name!r} (known: {known})", "load yours with --plugin file.py or --plugin pkg.module"
            )
        return self.ops[name]

    def impl(self, op: Op, entry: str) -> Impl:
        """One ``--impls`` entry: a name, ``pkg.module:factory`` or ``name=pkg.module:factory``."""
        entry = entry.strip()
        if ":" not in entry:
            return self.extra.get(op.name, {}).get(entry) or op.impl(entry)
        name, eq, target = entry.partition("=") if "=" in entry.split(":")[0] else ("", "", entry)
        obj = resolve(target)
        if isinstance(obj, Impl):
            return replace(obj, name=name) if eq else obj
        if not callable(obj):
            raise PluginError(None, f"{target} is {type(obj).__name__}, not a factory", "point at a function taking the buffers")
        doc = (getattr(obj, "__doc__", None) or "").strip().splitlines()
        return Impl(name or getattr(obj, "__name__", target.rpartition(":")[2]), obj, summary=doc[0] if doc else target)

    def impls(self, op: Op, text: str | Sequence[str] | None = None) -> list[Impl]:
        """A comma-separated ``--impls`` value, each name once; None: the op's default set."""
        entries = text.split(",") if isinstance(text, str) else list(text or [])
        entries = [e.strip() for e in entries if e.strip()]
        if text is None:
            entries = list(op.default_impls) or [i.name for i in op.impls()] + list(self.extra.get(op.name, {}))
        if not entries:
            raise UsageError(None, "no implementations given", f"choose from {', '.join(i.name for i in op.impls())}")
        found = [self.impl(op, e) for e in entries]
        names = [i.name for i in found]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise UsageError(None, f"{', '.join(twice)} listed more than once", "name each implementation once")
        return found


PLUGINS_VARIABLE = "NSYS_TOOLS_PLUGINS"
_ALLOWED: list[str] = []  # --plugin of the command running (``allow``)


def allow(plugins: Iterable[str]) -> None:
    """Plugins the user passed (``--plugin``) to the command now running, which reads sweep
    folders; they replace those of an earlier command in the same process."""
    _ALLOWED[:] = list(dict.fromkeys(plugins))


def user_plugins(given: Iterable[str] = ()) -> list[str]:
    """The plugins the user allowed: ``$NSYS_TOOLS_PLUGINS`` (separated by ``os.pathsep``),
    then ``given`` (``--plugin``). Data never adds to them: a manifest's ``spec.plugins`` is
    only compared with them."""
    import os

    env = [p.strip() for p in os.environ.get(PLUGINS_VARIABLE, "").split(os.pathsep) if p.strip()]
    return list(dict.fromkeys([*env, *_ALLOWED, *given]))


def shipped_plugins(named: Iterable[str]) -> list[str]:
    """Of the plugins a folder names, those that are studies shipped inside this package
    (``kernels.matmul``, ``nsys_tools.kernels.matmul``): loading them runs only code already
    installed with nsys-tools, whatever the folder says. Files and other modules are left out."""
    import importlib.util

    found = []
    for spec in named:
        if is_file_spec(spec):
            continue
        name = _shipped(spec)
        if name.startswith("nsys_tools.kernels.") and name.count(".") == 2:
            try:
                if importlib.util.find_spec(name) is not None:
                    found.append(name)
            except ImportError:
                pass
    return found


def plugin_key(spec: str) -> str:
    """What makes two plugin specs one plugin: a file's resolved path, a module's name."""
    return str(Path(spec).resolve()) if is_file_spec(spec) else _shipped(spec)


def load(plugins: Iterable[str] = (), *, entry_points: bool = True) -> Registry:
    """The registry of installed ops plus ``plugins`` (files or modules)."""
    return Registry(plugins, entry_points=entry_points)
