"""nsys-tools: Nsight Systems exports into Polars, same-session comparisons and issue comments.

The package imports nothing heavy at the top: ``capture/`` and the CLI's capture commands run on
GPU machines without Polars or Altair. The library lives in the modules:

- ``export``, ``schema``, ``events``, ``attribute``: reading exports into frames; ``inputs``: which exports;
- ``report``, ``metrics``, ``tables``: kernel statistics per NVTX range;
- ``plugin``, ``convention``: the op interface and the NVTX naming every capture follows;
- ``sweep``, ``verdict``, ``ledger``, ``issue``, ``charts``: sweeps and issue comments;
- ``compare``: any two captures, call for call;
- ``census``: the codegen census; ``scrub``: removing identity from exports; ``files``: safe outputs;
- ``cache``, ``bigexport``, ``bench``: large exports.
"""

__version__ = "0.1.0"
