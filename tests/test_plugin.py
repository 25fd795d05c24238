"""Op plugins: loading from a file, a module, --impls module:factory and the entry points; what a
bad plugin gets; the harness's setup of any op (no GPU: a NumPy op). Standard library and NumPy
only, like the capture side."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from nsys_tools.capture.harness import make_sets, prepare, setup
from nsys_tools.errors import NsysToolsError, PluginError, UsageError
from nsys_tools.plugin import Buffers, Impl, Registry, UnsupportedShape, lazy

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "softmax_op.py"
SCALE = Path(__file__).parent / "plugins" / "scale_op.py"


def test_the_example_op_loads_from_its_file():
    registry = Registry([str(EXAMPLE)])
    op = registry.op("softmax")
    assert set(registry.ops) >= {"layernorm", "softmax"} and registry.sources == [str(EXAMPLE)]
    impls = registry.impls(op)
    assert [i.name for i in impls] == ["rowwise", "torch", "torch_alloc", "copy"]
    assert [i.family for i in impls] == ["ours", "control", "control", "control"]
    assert [i.allocates for i in impls] == [False, False, True, False]
    assert op.canonical("4096X1000") == "4096x1000" and op.parse_shape("8x16") == (8, 16)
    assert op.work(impls[0], (4096, 1000)) == {"bytes": 2 * 4096 * 1000 * 4, "flops": 4 * 4096 * 1000}
    assert op.work(impls[3], (4096, 1000))["flops"] == 0  # the copy overrides the op's FLOPs
    with pytest.raises(UnsupportedShape, match="at most 16384 floats, got N = 32768"):
        impls[0].check((4, 32768))


def test_a_module_plugin_and_extra_implementations(tmp_path, monkeypatch):
    (tmp_path / "my_kernels.py").write_text(
        textwrap.dedent('''\
        from nsys_tools.plugin import Impl

        def make_fast(buffers, unroll=4):
            """A LayerNorm of my own, four rows a block."""
            return lambda: None

        TUNED = Impl("tuned", make_fast, options={"unroll": 8})
        IMPLS = {"layernorm": [Impl("mine", make_fast, summary="beside the built-in controls")]}
        ''')
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = Registry(["my_kernels"])
    layernorm = registry.op("layernorm")
    mine, fast, renamed, tuned = registry.impls(
        layernorm, "mine,my_kernels:make_fast,quick=my_kernels:make_fast,my_kernels:TUNED"
    )
    assert mine.summary == "beside the built-in controls" and fast.name == "make_fast" and renamed.name == "quick"
    assert fast.summary == "A LayerNorm of my own, four rows a block." and fast.family == "ours"
    assert tuned.options == {"unroll": 8}
    assert [i.name for i in registry.impls(layernorm, "ours,triton")] == ["ours", "triton"]


def test_builtin_ops_come_from_the_entry_point_group():
    assert "layernorm" in Registry().ops
    assert Registry(entry_points=False).ops == {}
    with pytest.raises(UsageError, match="unknown op 'layernorm' \\(known: none\\)"):
        Registry(entry_points=False).op("layernorm")


@pytest.mark.parametrize(
    "plugins, impls, message",
    [
        (["no/such/plugin.py"], None, "plugin.py: no such plugin file"),
        (["no_such_module_anywhere"], None, "cannot import 'no_such_module_anywhere'"),
        ([str(SCALE)], "good,nsys_tools.plugin:no_factory", "nsys_tools.plugin: has no 'no_factory'"),
        ([str(SCALE)], "good,nsys_tools.plugin:OPS_GROUP", "is str, not a factory"),
        ([str(SCALE)], "good,missing", "scale has no implementation 'missing'"),
        ([str(SCALE)], "good,good", "good listed more than once"),
    ],
)
def test_bad_plugins_are_named(plugins, impls, message):
    with pytest.raises(NsysToolsError, match=message):
        registry = Registry(plugins)
        registry.impls(registry.op("scale"), impls)


def test_broken_plugin_files(tmp_path):
    raising = tmp_path / "raising.py"
    raising.write_text("raise ValueError('half written')\n")
    with pytest.raises(PluginError, match="raising.py: failed to import: ValueError: half written"):
        Registry([str(raising)])
    empty = tmp_path / "empty.py"
    empty.write_text("X = 1\n")
    with pytest.raises(PluginError, match="defines no OPS, OP or IMPLS"):
        Registry([str(empty)])
    wrong = tmp_path / "wrong.py"
    wrong.write_text("OPS = ['softmax']\n")
    with pytest.raises(PluginError, match="OPS holds 'softmax', not an nsys_tools.plugin.Op"):
        Registry([str(wrong)])
    with pytest.raises(PluginError, match="not usable in an NVTX range"):
        Impl("a/b", lambda b: None)
    with pytest.raises(PluginError, match="family must be 'ours' or 'control'"):
        Impl("a", lambda b: None, family="baseline")


def test_a_shape_the_op_rejects():
    op = Registry([str(SCALE)]).op("scale")
    for text in ("4", "4x8x2", "0x8", "ax8"):
        with pytest.raises(UsageError, match="unknown scale shape"):
            op.canonical(text)


def test_setup_checks_each_implementation_and_records_failures():
    registry = Registry([str(SCALE)])
    op = registry.op("scale")
    impls = registry.impls(op, "good,narrow,raises")
    sets = make_sets(op, (2, 16), "cpu", l2_bytes=512, l2="cold", outputs="rotate")
    assert len(sets) == 3 and sets[0].y is not sets[1].y  # 512 B per set of x and y, more than twice 512 B of L2
    launchers, checks, errors, unsupported = prepare(op, impls, sets)
    assert list(launchers) == ["good"] and checks == {"good": 0.0}
    assert errors == {"raises": "ValueError: the kernel did not compile"}
    assert unsupported == {"narrow": "narrow: rows of at most 8, got 16"}
    reused = make_sets(op, (2, 16), "cpu", l2_bytes=512, l2="cold", outputs="reuse")
    assert len({id(b.y) for b in reused}) == 1 and len(reused) == 5  # only x rotates
    with pytest.raises(NsysToolsError, match="no implementation of scale ran at 2x16; raises: ValueError: the kernel did not"):
        setup(op, registry.impls(op, "raises"), sets)


def test_a_wrong_answer_is_caught():
    registry = Registry([str(SCALE)])
    op = registry.op("scale")
    sloppy = Impl("sloppy", lazy(f"{__name__}:_make_sloppy"))
    launchers, checks, errors, _ = prepare(op, [sloppy], make_sets(op, (4, 8), "cpu", 0, "warm", "reuse"))
    assert checks["sloppy"] > op.tolerance() and not errors


def _make_sloppy(buffers: Buffers):
    def launch() -> None:
        buffers.y[:] = 2.0 * buffers.x
        buffers.y[0, 0] += 1.0

    return launch


def test_a_folder_naming_a_shipped_study_loads_it_and_nothing_else(tmp_path, monkeypatch):
    """A sweep captured with ``--plugin kernels.matmul`` (the shipped study's old name) gets its
    op back from the package; a file or another module the manifest names is never imported."""
    from nsys_tools.plugin import shipped_plugins

    planted = tmp_path / "planted.py"
    planted.write_text("raise SystemExit('planted code ran')\n")
    (tmp_path / "planted_mod.py").write_text("raise SystemExit('planted code ran')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    named = ["kernels.matmul", "nsys_tools.kernels.layernorm", str(planted), "planted_mod", "nsys_tools.cli", "os"]
    assert shipped_plugins(named) == ["nsys_tools.kernels.matmul", "nsys_tools.kernels.layernorm"]
