"""Op plugins: the contract a plugin author writes against (``api``: ``Op``, ``Impl``, ``Buffers``,
``lazy``) and the loader that finds plugins in files, modules and entry points (``loader``:
``Registry``). Both are standard library only; ``docs/guides/plugins.md`` is the guide.
``from nsys_tools.plugin import Op, Impl`` is the import plugins use."""

from .api import NAME_TEXT, SHAPE_TEXT, Buffers, Cubin, Factory, Impl, Launch, Op, Shape, UnsupportedShape, arch_number, lazy
from .loader import (
    OPS_GROUP,
    PLUGINS_VARIABLE,
    Registry,
    allow,
    installed_entry_points,
    is_file_spec,
    load,
    plugin_key,
    resolve,
    shipped_plugins,
    user_plugins,
)

__all__ = [
    "NAME_TEXT", "SHAPE_TEXT", "Buffers", "Cubin", "Factory", "Impl", "Launch", "Op", "Shape", "UnsupportedShape",
    "arch_number", "lazy", "OPS_GROUP", "PLUGINS_VARIABLE", "Registry", "allow", "installed_entry_points", "is_file_spec",
    "load", "plugin_key", "resolve", "shipped_plugins", "user_plugins",
]  # fmt: skip
