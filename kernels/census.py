"""The census hooks of the LayerNorm implementations: our CUDA C++ through NVRTC
(``cuda.bindings``, ``nvrtc_cubin``, which the matmul kernels use too) and the Triton control
through ``triton.compile``, each to a cubin for a target with no GPU present, exactly as the
launchers would build them for a shape.

Our kernels compile with the options and template instantiation the launcher uses (including
what CuPy adds on its own). Triton's kernel is specialized the way Triton's launcher would
specialize it for that shape: 16-byte aligned pointers and integers divisible by 16 marked
``tt.divisibility=16``.
"""

from __future__ import annotations

from pathlib import Path

from nsys_tools.errors import NsysToolsError, ToolMissing
from nsys_tools.plugin import Cubin, Shape, arch_number


def nvrtc_cubin(source: Path, name: str, options: tuple[str, ...], arch: str) -> tuple[str, bytes]:
    """Compile ``source`` for ``arch`` through NVRTC with ``options`` and the ones CuPy adds,
    instantiating ``name``: (its mangled name, the cubin)."""
    from .cuda import CUPY_IMPLICIT_OPTIONS

    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise ToolMissing(None, "NVRTC's Python bindings are not installed", "pip install 'nsys-tools[census]'") from exc
    try:
        err, prog = nvrtc.nvrtcCreateProgram(source.read_bytes(), source.name.encode(), 0, [], [])
    except RuntimeError as exc:  # the bindings could not load libnvrtc
        raise ToolMissing(None, f"NVRTC could not be loaded ({exc})", "pip install 'nsys-tools[census]'") from exc
    nvrtc.nvrtcAddNameExpression(prog, name.encode())
    opts = [o.encode() for o in (*options, *CUPY_IMPLICIT_OPTIONS, f"-arch={arch}")]
    (result,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
    if result != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        _, size = nvrtc.nvrtcGetProgramLogSize(prog)
        log = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, log)
        message = log.decode(errors="replace").strip(" \x00\n")[:300]
        raise NsysToolsError(source, f"NVRTC failed for {name}: {message}")
    _, lowered = nvrtc.nvrtcGetLoweredName(prog, name.encode())
    _, size = nvrtc.nvrtcGetCUBINSize(prog)
    cubin = b" " * size
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    nvrtc.nvrtcDestroyProgram(prog)
    return lowered.decode(), cubin


def compile_ours(variant: str, shape: Shape, arch: str) -> Cubin:
    """NVRTC: ``kernels/layernorm.cu`` with the launcher's options and instantiation, to a cubin."""
    from .cuda import NVRTC_OPTIONS, SOURCE, launch_config

    m, n = shape
    plan = launch_config(variant, m, n, vec=4 if n % 4 == 0 else 1, arch=arch_number(arch))
    lowered, cubin = nvrtc_cubin(SOURCE, plan.kernel, NVRTC_OPTIONS, arch)
    return Cubin(lowered, cubin, plan.grid, plan.block, plan.shared_bytes)


def compile_forward(dtype: str, plan: str, shape: Shape, arch: str) -> Cubin:
    """NVRTC: ``ln_fwd`` of ``kernels/ln_train.cu`` as ``make_forward`` plans it for contiguous,
    aligned rows (by the rule, or the explicit ``plan``), to a cubin."""
    from .cuda import NVRTC_OPTIONS
    from .train_cuda import SOURCE, forward_plan

    m, n = shape
    vector = n % (16 // {"bf16": 2, "fp32": 4}[dtype]) == 0
    launch = forward_plan(m, n, dtype, vector, named=plan)
    lowered, cubin = nvrtc_cubin(SOURCE, launch.kernel, NVRTC_OPTIONS, arch)
    return Cubin(lowered, cubin, launch.grid, launch.block, launch.shared_bytes)


def compile_triton(shape: Shape, arch: str) -> Cubin:
    """``triton.compile`` of the control for ``arch``, specialized as its launcher would be."""
    try:
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource
    except ImportError as exc:
        raise ToolMissing(None, "Triton is not installed", "pip install 'nsys-tools[census]'") from exc
    from .triton_ln import launch_params, layer_norm_fwd

    m, n = shape
    block, warps = launch_params(n)
    pointers = ["X", "Y", "W", "B", "Mean", "Rstd"]
    ints = {"stride_x": n, "stride_y": n, "N": n}  # contiguous rows, as the harness allocates them
    signature = {**dict.fromkeys(pointers, "*fp32"), **dict.fromkeys(ints, "i32"), "eps": "fp32", "BLOCK": "constexpr"}
    constexprs = {"BLOCK": block, **{k: 1 for k, v in ints.items() if v == 1}}
    signature.update({k: "constexpr" for k, v in ints.items() if v == 1})
    names = layer_norm_fwd.arg_names
    aligned = pointers + [k for k, v in ints.items() if v % 16 == 0]
    attrs = {(names.index(a),): [["tt.divisibility", 16]] for a in aligned}
    src = ASTSource(fn=layer_norm_fwd, signature=signature, constexprs=constexprs, attrs=attrs)
    kernel = triton.compile(src, target=GPUTarget("cuda", arch_number(arch), 32), options={"num_warps": warps})
    return Cubin(kernel.metadata.name, kernel.asm["cubin"], m, warps * 32, kernel.metadata.shared)
