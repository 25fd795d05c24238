"""The matmul ops and our kernels' launch plans, without a GPU; the kernels compiled for sm_90
through NVRTC and read back with cuobjdump (the census extra)."""

from __future__ import annotations

import re
import sys

import pytest

from kernels.matmul import OPS
from kernels.matmul_cuda import NAMED_PLANS, VARIANTS, Operands, plan, variants
from nsys_tools import census
from nsys_tools.errors import UsageError
from nsys_tools.plugin import UnsupportedShape

OP = {op.dtype: op for op in OPS}


def test_ops_one_precision_each():
    assert [op.name for op in OPS] == ["matmul_bf16", "matmul_tf32"]
    bf16, tf32 = OP["bf16"], OP["tf32"]
    assert bf16.parse_shape("2048x11008x4096") == (2048, 11008, 4096)
    assert bf16.format_shape((7, 9, 5)) == "7x9x5"
    with pytest.raises(UsageError, match="MxNxK"):
        bf16.parse_shape("4096x4096")
    assert bf16.flops((3, 5, 7)) == 2 * 3 * 5 * 7
    assert bf16.bytes_moved((3, 5, 7)) == (3 * 7 + 7 * 5 + 3 * 5) * 2  # read A and B, write C
    assert tf32.bytes_moved((3, 5, 7)) == (3 * 7 + 7 * 5 + 3 * 5) * 4
    assert (bf16.tolerance(), tf32.tolerance()) == (1e-2, 3e-3)
    assert bf16.control == "torch" and list(bf16.default_impls) == ["ours", "triton", "torch"]


def test_impls_and_explicit_plans():
    op = OP["bf16"]
    names = [i.name for i in op.impls()]
    assert names == [*VARIANTS, "triton", "torch"]
    assert "wgmma_tma_store" not in variants("tf32")  # a bf16-only kernel (register budget)
    with pytest.raises(UnsupportedShape, match="no tf32 plan"):
        plan("wgmma_tma_store", 64, 64, 64, Operands("tf32"))
    assert {i.family for i in op.impls() if i.name in VARIANTS} == {"ours"}
    explicit = op.impl("wgmma_n128_s5")
    assert explicit.family == "ours" and explicit.compile((256, 256, 256), "sm_90").kernel.startswith("_Z13mm_wgmma_bf16ILi128ELi5E")
    with pytest.raises(UsageError, match="no implementation"):
        op.impl("wgmma_n96_s5")


def test_import_needs_no_gpu_stack():
    heavy = [m for m in sys.modules if m.split(".")[0] in ("torch", "cupy", "polars")]
    import kernels.matmul  # noqa: F401  (already imported: nothing heavy came with it)

    assert [m for m in sys.modules if m.split(".")[0] in ("torch", "cupy")] == [m for m in heavy if m.split(".")[0] != "polars"]


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_dispatch_prefers_wgmma_where_tma_can_read(dtype):
    big = plan("ours", 8192, 8192, 8192, Operands(dtype))
    assert big.block == 384 and big.tma
    if dtype == "bf16":  # persistent, 3 stages, C through shared memory and TMA
        assert big.kernel == "mm_wgmma_bf16<256, 3, 0, 1>" and big.grid == 132
        assert big.shared_bytes == 3 * 48 * 1024 + 64 * 1024 + 1024
    else:  # one tile per block
        assert big.kernel == "mm_wgmma_tf32<256, 4>" and big.grid == (8192 // 256) * (8192 // 128)
        assert big.shared_bytes == 4 * 48 * 1024 + 1024
    unaligned = plan("ours", 7, 9, 5, Operands(dtype, aligned=False))
    assert "mm_mma<" in unaligned.kernel and unaligned.kernel.endswith("false>") and not unaligned.tma
    ampere = plan("ours", 4096, 4096, 4096, Operands(dtype, arch=80))
    assert ampere.kernel.endswith("true>") and "mm_mma<" in ampere.kernel


def test_plans_refuse_what_they_cannot_run():
    with pytest.raises(UnsupportedShape, match="needs TMA"):
        plan("wgmma", 7, 9, 5, Operands("bf16", aligned=False))
    with pytest.raises(UnsupportedShape, match="sm_80"):
        plan("wgmma", 4096, 4096, 4096, Operands("bf16", arch=80))
    with pytest.raises(UnsupportedShape, match="shared memory"):
        plan("wgmma_n256_s5", 4096, 4096, 4096, Operands("bf16"))  # 5 x 48 KB
    with pytest.raises(UnsupportedShape, match="unknown matmul variant"):
        plan("mma_96x96_w2x2_s3", 64, 64, 64, Operands("bf16"))
    assert plan("wgmma_n128_s7", 1, 8, 8, Operands("bf16")).grid == 1


def test_named_plans_are_plans():
    for name, per_dtype in NAMED_PLANS.items():
        for dtype, explicit in per_dtype.items():
            assert plan(name, 512, 512, 512, Operands(dtype)) == plan(explicit, 512, 512, 512, Operands(dtype))
    persistent = plan("wgmma_persistent", 8192, 8192, 8192, Operands("bf16", sms=100))
    assert persistent.kernel == "mm_wgmma_bf16<256, 4, 1, 0>" and persistent.grid == 100
    assert plan("wgmma_persistent", 64, 64, 64, Operands("tf32")).grid == 1  # never more blocks than tiles


def _sass(impl: str, dtype: str):
    c = OP[dtype].impl(impl).compile((4096, 4096, 4096), "sm_90")
    ops = census.OPCODE.findall(census._function_text(census._dump(c.cubin, "-sass"), c.kernel, r"\n\s*Function : (\S+)"))
    return c, census.resources(c.cubin, c.kernel, "sm_90"), [o.split(".")[0] for o in ops]


@pytest.mark.parametrize("dtype", ["bf16", "tf32"])
def test_wgmma_kernel_is_what_it_claims(dtype):
    """HGMMA from TMA-fed shared memory, no spills, registers within the 168 a thread of a
    384-thread block gets."""
    c, res, ops = _sass("wgmma", dtype)
    assert re.match(rf"_Z13mm_wgmma_{dtype}ILi256ELi4E", c.kernel)
    assert ops.count("HGMMA") == 4 and ops.count("HMMA") == 0  # four k steps per stage
    assert ops.count("UTMALDG") == 5  # A and four boxes of B per stage
    assert res["local_bytes"] == 0 and "STL" not in ops and res["registers"] <= 168
    assert (c.grid, c.block, c.dynamic_shared_bytes) == (512, 384, 4 * 48 * 1024 + 1024)


def test_mma_and_simt_kernels():
    _, res, ops = _sass("mma", "bf16")
    assert ops.count("HMMA") == 64 and ops.count("LDSM") == 16 and ops.count("LDGSTS") > 0 and res["local_bytes"] == 0
    _, res, ops = _sass("simt", "tf32")
    assert ops.count("FFMA") == 512 and "HMMA" not in ops and res["local_bytes"] == 0
