"""A stand-in for ``nsys``, so that the capture side's bookkeeping runs for real without a GPU.

``nsys profile ... python -m nsys_tools.capture.harness ARGS`` resolves ARGS exactly as the harness does
(``nsys_tools.capture.harness.plan``: the plugins it is given, in the folder it runs in), and writes what
the harness would: ``<shape>.harness.json`` with each implementation's description from its
plugin and each round's order from ``--seed``, and the checks, spans and clock samples of a real
H200 sweep (``DEMO``), its four implementations renamed to the ones asked for. ``nsys export`` then writes a real export of that
sweep with its NVTX ranges renamed the same way. For any other program, ``profile`` runs it and
keeps its exit code; its export is a copy of ``$FAKE_EXPORT``.

Shapes listed in ``$FAKE_FAIL`` fail as a CUDA program out of memory would. With
``$FAKE_SETUP`` set, the harness's setup runs for real first, on the CPU (for NumPy ops).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
DEMO_SHAPE = "4096x768"
DEMO_IMPLS = ("ours", "triton", "torch", "copy")


def _renames(op: str, shape: str, impls: list[str]) -> dict[str, str]:
    return {f"layernorm/{a}/{DEMO_SHAPE}/": f"{op}/{b}/{shape}/" for a, b in zip(DEMO_IMPLS, impls, strict=False)}


def profile_harness(argv: list[str], rep: Path) -> int:
    from nsys_tools.capture.harness import describe, parse_args, plan
    from nsys_tools.convention import round_orders

    args = parse_args(argv)
    op, shape, impls = plan(args)
    if shape in os.environ.get("FAKE_FAIL", "").split(","):
        print("CUDA error: out of memory", file=sys.stderr)
        return 3
    if os.environ.get("FAKE_SETUP"):  # an op whose buffers need no GPU: set it up for real
        from nsys_tools.capture.harness import make_sets, setup
        from nsys_tools.errors import NsysToolsError

        try:
            setup(op, impls, make_sets(op, op.parse_shape(shape), "cpu", 0, args.l2, args.outputs))
        except NsysToolsError as err:
            print(f"Error: {err}", file=sys.stderr)
            return 1
    names = [i.name for i in impls][: len(DEMO_IMPLS)]
    record = json.loads((DEMO / f"{DEMO_SHAPE}.harness.json").read_text())
    rename = dict(zip(DEMO_IMPLS, names, strict=False))
    spans = record["spans"]
    keep = [k for k, impl in enumerate(spans["impl"]) if impl in rename]
    record.update(
        op=op.name,
        shape=shape,
        outputs=args.outputs,
        impls=names,
        seed=args.seed,
        order="shuffled",
        orders=round_orders(names, args.rounds, args.seed),
        implementations={i.name: describe(op, i, op.parse_shape(shape), args.outputs) for i in impls[: len(names)]},
        checks={rename[k]: v for k, v in record["checks"].items() if k in rename},
        spans={
            "impl": [rename[spans["impl"][k]] for k in keep],
            **{c: [spans[c][k] for k in keep] for c in ("round", "span_ns")},
        },
    )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{shape}.harness.json").write_text(json.dumps(record))
    rep.with_suffix(".nsys-rep").write_text(json.dumps({"harness": True, "renames": _renames(op.name, shape, names)}))
    return 0


def profile_program(program: list[str], rep: Path) -> int:
    code = subprocess.run(program).returncode
    rep.with_suffix(".nsys-rep").write_text(json.dumps({"harness": False}))
    return code


def export(report: Path, output: Path) -> None:
    what = json.loads(report.read_text())
    if not what["harness"]:
        shutil.copy(os.environ["FAKE_EXPORT"], output)
        return
    shutil.copy(DEMO / f"{DEMO_SHAPE}.sqlite", output)
    con = sqlite3.connect(output)
    with con:
        for old, new in what["renames"].items():
            con.execute("UPDATE NVTX_EVENTS SET text = replace(text, ?, ?) WHERE text LIKE ?", (old, new, old + "%"))
    con.close()


def main(argv: list[str]) -> int:
    if argv[0] == "--version":
        print("NVIDIA Nsight Systems version 2025.3.1.0")
        return 0
    if argv[0] == "profile":
        rep = Path(argv[argv.index("-o") + 1])
        program = argv[argv.index("-o") + 2 :]
        if program[1:3] == ["-m", "nsys_tools.capture.harness"]:
            return profile_harness(program[3:], rep)
        return profile_program(program, rep)
    if argv[0] == "export":
        export(Path(argv[-1]), Path(argv[argv.index("--output") + 1]))
        return 0
    print(f"fake nsys: unknown command {argv[0]}", file=sys.stderr)
    return 2


def install(folder: Path) -> Path:
    """An executable ``nsys`` in ``folder`` that runs this module with this interpreter."""
    script = folder / "nsys"
    here = Path(__file__).resolve()
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys\n"
        f"sys.path[:0] = [{str(here.parent)!r}, {str(here.parents[1])!r}]\n"
        "import fake_nsys\n"
        "sys.exit(fake_nsys.main(sys.argv[1:]))\n"
    )
    script.chmod(0o755)
    return script
