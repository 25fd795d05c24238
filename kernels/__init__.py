"""The studies that ship with nsys-tools, as op plugins: LayerNorm forward (``kernels.layernorm``),
with ours (CUDA C++ through CuPy) and the controls (``kernels.registry``)."""
