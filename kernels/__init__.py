"""The studies that ship with nsys-tools, as op plugins: LayerNorm forward (``nsys_tools.kernels.layernorm``),
with ours (CUDA C++ through CuPy) and the controls (``nsys_tools.kernels.registry``); matrix multiplication
in bf16 and TF32 (``nsys_tools.kernels.matmul``, loaded with ``--plugin nsys_tools.kernels.matmul``)."""
