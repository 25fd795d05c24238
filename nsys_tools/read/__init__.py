"""Reading exports: opening them, schema shims, table readers, NVTX attribution, Trace, windows,
inputs, the cache, and the accounting of what an export holds."""
