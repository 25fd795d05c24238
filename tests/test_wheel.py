"""The wheel, installed into a fresh virtual environment: it adds one top-level import name,
``nsys_tools`` (capture/ and kernels/ go inside it), and the demo, the shipped op's entry point and
``--plugin`` with a shipped module work from it, away from the source checkout."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, environment that finds the analysis stack but not the checkout, a folder outside it)."""
    tmp = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "hatchling", "build", "-t", "wheel", "-d", str(tmp / "dist")], cwd=ROOT, check=True,
                   capture_output=True)  # fmt: skip
    (wheel,) = (tmp / "dist").glob("*.whl")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp / "venv")], check=True)
    python = tmp / "venv" / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", str(wheel)], check=True,
                   capture_output=True)  # fmt: skip
    # The dependencies come from this interpreter's site-packages, through a .pth file: its folder goes
    # after the venv's own, so the wheel's nsys_tools wins even where this interpreter has one installed
    # too (CI installs the project). The working folder is outside the checkout, so nothing of the
    # source tree is importable.
    (_site_packages(python) / "analysis-stack.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NSYS_TOOLS_LEDGER")}
    work = tmp / "work"
    work.mkdir()
    return python, env, work


def _site_packages(python: Path) -> Path:
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], capture_output=True,
                         text=True, check=True)  # fmt: skip
    return Path(out.stdout.strip())


def test_the_only_new_top_level_name_is_nsys_tools(installed):
    python, _, _ = installed
    names = {p.name.removesuffix(".py") for p in _site_packages(python).iterdir() if not p.name.endswith((".dist-info", ".pth"))}
    names -= {"__pycache__"}
    assert names == {"nsys_tools"}
    assert (_site_packages(python) / "nsys_tools" / "kernels" / "layernorm.cu").is_file()


def test_the_demo_issue_comment_runs_from_the_wheel(installed):
    python, env, work = installed
    exe = python.with_name("nsys-tools")
    done = subprocess.run([str(exe), "report", "--demo", "--issue", "--charts", "charts"], cwd=work, env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### LayerNorm: ours, triton, torch, copy (control: triton)")
    assert sorted(p.name for p in (work / "charts").glob("*.png"))[:2] == ["history-1024x2048.png", "history-4096x4096.png"]


def test_shipped_ops_load_from_the_wheel_by_entry_point_and_by_module(installed):
    python, env, work = installed
    code = (
        "import sys; sys.modules['polars'] = None; sys.modules['altair'] = None\n"
        "import nsys_tools.capture.harness, nsys_tools.kernels.layernorm\n"
        "from nsys_tools.plugin import Registry\n"
        "r = Registry(['nsys_tools.kernels.matmul', 'kernels.matmul'])\n"  # the second as folders captured earlier name it
        "print(sorted(r.ops), nsys_tools.kernels.layernorm.__file__)\n"
    )
    done = subprocess.run([str(python), "-c", code], cwd=work, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    ops, where = done.stdout.split("] ")
    assert ops + "]" == "['layernorm', 'matmul_bf16', 'matmul_tf32']"
    assert where.strip().startswith(str(_site_packages(python)))
