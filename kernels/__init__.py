"""The studies that ship with nsys-tools, as op plugins: LayerNorm forward (``kernels.layernorm``),
with ours (CUDA C++ through CuPy) and the controls (``kernels.registry``); matrix multiplication
in bf16 and TF32 (``kernels.matmul``, loaded with ``--plugin kernels.matmul``)."""
