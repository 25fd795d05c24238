"""nsys-tools: Nsight Systems exports into Polars, same-session comparisons and issue comments.

Start from ``nsys_tools.open(path)``: a ``Trace`` whose methods give the export's kernels,
memory operations, API calls, NVTX ranges and GPU operations (attributed to their ranges) as
Polars frames; ``nsys_tools.views`` turns them into the standard tables.

The package imports nothing heavy at the top (``open`` and ``Trace`` are loaded on first use):
``capture/`` and the CLI's capture commands run on GPU machines without Polars or Altair. The
library lives in the modules:

- ``trace`` (the frame layer) over ``export``, ``schema``, ``events``, ``attribute``; ``inputs``: which exports;
- ``views`` (kernels, ranges, api, memops, gaps), ``report``, ``metrics``, ``tables``;
- ``plugin``, ``convention``: the op interface and the NVTX naming every capture follows;
- ``sweep``, ``verdict``, ``ledger``, ``issue``, ``charts``: sweeps and issue comments;
- ``compare``: any two captures, call for call;
- ``census``: the codegen census; ``scrub``: removing identity from exports; ``files``: safe outputs;
- ``cache``, ``bigexport``, ``bench``: large exports.
"""

import os as _os
import sys as _sys

__version__ = "0.1.0"
__all__ = ["Trace", "open", "__version__"]

# Polars' allocator (jemalloc) keeps freed pages resident for 0.5 s, then 1 s more as lazily
# freed pages, which still count as resident. Reading a large export a piece a second, that is
# the last pieces' memory on top of this one's: a third of the peak. Returned after 0.1 s, it
# is not. Read when Polars is imported (it appends this to its own settings), so it is set only
# before, and never over a setting of the user's.
if "polars" not in _sys.modules:
    _os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")


def __getattr__(name: str):
    """``nsys_tools.open`` and ``nsys_tools.Trace``, imported on first use (PEP 562)."""
    if name in ("open", "Trace"):
        from . import trace

        return getattr(trace, name)
    raise AttributeError(f"module 'nsys_tools' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), "open", "Trace"])
