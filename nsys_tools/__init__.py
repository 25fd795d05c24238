"""nsys-tools: Nsight Systems exports into Polars, same-session comparisons and issue comments.

Start from ``nsys_tools.open(path)``: a ``Trace`` whose methods give the export's kernels,
memory operations, API calls, NVTX ranges and GPU operations (attributed to their ranges) as
Polars frames, and ``trace.view.NAME(...)`` each standard table (``nsys_tools.views``), lazily.

The package imports nothing heavy at the top (``open`` and ``Trace`` are loaded on first use):
``capture/`` and the CLI's capture commands run on GPU machines without Polars or Altair. The
library lives in layers (ARCHITECTURE.md), each importing only from those below it:

- ``cli``: the commands; ``study/``: capture folders, the contention verdict, ledger, compare, census,
  the issue comment; ``facade``: ``open`` and ``Trace``; ``capture/``: running captures on a GPU;
- ``run/``: the report pipeline (per-file partials, exact merge, pieces and spill, engines, bench);
- ``views/``: the standard tables and the mergeable statistics (``views.stats``);
- ``read/``: exports, schema, table readers, attribution, the frame layer, inputs, cache, scrub;
  ``render/``: tables and charts; ``kernels/``: the studies we ship, as op plugins;
- ``plugin``, ``convention``, ``files``, ``resources``, ``errors``.
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"
__all__ = ["Trace", "open", "__version__"]


def _bundled_from_checkout() -> None:
    """``nsys_tools.capture`` and ``nsys_tools.kernels`` in a source checkout.

    The wheel installs ``capture/`` and ``kernels/`` inside this package (pyproject's wheel ``sources``),
    so nothing is installed under those generic top-level names. In a checkout they stay beside it; this
    finder gives them the same names there, so every import, entry point and ``python -m`` reads
    ``nsys_tools.capture...`` / ``nsys_tools.kernels...`` either way (the import contracts see those
    imports under the checkout's names: ``tests/layers.py``). Standard library only."""
    import importlib.util

    here = _os.path.dirname(_os.path.abspath(__file__))
    checkout = _os.path.dirname(here)
    beside = {
        f"{__name__}.{name}": _os.path.join(checkout, name)
        for name in ("capture", "kernels")
        if not _os.path.isdir(_os.path.join(here, name)) and _os.path.isfile(_os.path.join(checkout, name, "__init__.py"))
    }
    if not beside:
        return

    class _Beside:  # a meta path finder (importlib.abc would import importlib.resources, a start-up's worth)
        def find_spec(self, fullname, path=None, target=None):
            where = beside.get(fullname)
            if where is None:
                return None
            return importlib.util.spec_from_file_location(
                fullname, _os.path.join(where, "__init__.py"), submodule_search_locations=[where]
            )

    _sys.meta_path.append(_Beside())


_bundled_from_checkout()


def __getattr__(name: str):
    """``nsys_tools.open`` and ``nsys_tools.Trace``, imported on first use (PEP 562)."""
    if name in ("open", "Trace"):
        from . import facade

        return getattr(facade, name)
    raise AttributeError(f"module 'nsys_tools' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "open", "Trace"])
