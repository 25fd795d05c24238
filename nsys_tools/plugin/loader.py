"""Loading op plugins: files, modules and the ``nsys_tools.ops`` entry points, into a ``Registry``
(standard library only). What a plugin defines is ``nsys_tools.plugin.api``; where plugins come
from, ``docs/guides/plugins.md``.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

from ..errors import PluginError, UsageError
from .api import NAME_TEXT, Impl, Op

OPS_GROUP = "nsys_tools.ops"


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

    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
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
            raise PluginError(source, "defines no OPS, OP or IMPLS", "see docs/guides/plugins.md")
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
