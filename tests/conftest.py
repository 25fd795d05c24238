from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"
SWEEPS = Path(__file__).resolve().parents[1] / "reports" / "sweeps"


def unpack_sweeps() -> None:
    """The committed sweeps are archives, ``reports/sweeps/<id>.tar.xz``; the tests read the
    folders they hold, unpacked once beside them (git ignores them) with the checks every archive
    gets. A folder is unpacked under a hidden name and renamed into place, so that parallel
    workers never see half of one."""
    from nsys_tools import archives

    for archive in sorted(SWEEPS.glob(f"*{archives.SUFFIX}")):
        folder = SWEEPS / archives.name_of(archive)
        if folder.is_dir():
            continue
        work = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=SWEEPS))
        try:
            archives.unpack(archive, work).rename(folder)
        except OSError:
            if not folder.is_dir():  # another worker renamed its copy first: that one is as good
                raise
        finally:
            shutil.rmtree(work, ignore_errors=True)


unpack_sweeps()
# Sweeps of LayerNorm on the H200, 2026-11-29: quiet sessions and one under a background load.
QUIET = SWEEPS / "20261129-183449-quiet"
QUIET_2 = SWEEPS / "20261129-183620-quiet"
LOADED = SWEEPS / "20261129-183713-loaded"
MATMUL_BF16 = SWEEPS / "20261130-004548-matmul-bf16"  # cuBLAS: a memset, then its kernel, per call
# Test files that need only the capture side's stack (no Polars, Altair, typer): what the GPU
# machine, which lacks the analysis stack, can collect for ``pytest -m gpu``.
CAPTURE_SIDE = {"test_kernels_gpu.py", "test_harness_gpu.py", "test_scrub_capture.py", "test_kernels.py", "test_plugin.py"}


def _analysis_stack_missing() -> bool:
    import importlib.util

    return any(importlib.util.find_spec(name) is None for name in ("polars", "typer", "sqlite_utils"))


def pytest_ignore_collect(collection_path, config):
    """Skip collecting the analysis side's tests where its stack is not installed."""
    if collection_path.suffix == ".py" and collection_path.name.startswith("test_") and collection_path.name not in CAPTURE_SIDE:
        return True if _analysis_stack_missing() else None
    return None


def _gpu_missing() -> str | None:
    try:
        import torch
    except ImportError:
        return "needs a CUDA GPU and torch (run on the GPU machine: pytest -m gpu)"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: none is visible (run on the GPU machine: pytest -m gpu)"
    return None


def _census_missing() -> str | None:
    """Why the census cannot compile here: it needs Triton (and its cuobjdump) and NVRTC, the
    ``census`` extra (not in ``test``, which stays light for CPU-only contributors)."""
    from importlib.metadata import PackageNotFoundError, version

    missing = []
    for dist in ("triton", "cuda-bindings", "nvidia-cuda-nvrtc"):
        try:
            version(dist)
        except PackageNotFoundError:
            missing.append(dist)
    return f"needs the census compilers ({', '.join(missing)}): pip install '.[census]'" if missing else None


def pytest_collection_modifyitems(config, items):
    """Tests marked ``gpu`` or ``census`` are skipped, with the reason, where what they need is missing."""
    for marker, missing in (("gpu", _gpu_missing), ("census", _census_missing)):
        marked = [item for item in items if marker in item.keywords]
        reason = missing() if marked else None
        for item in marked if reason else ():
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session", autouse=True)
def own_cache_folder(tmp_path_factory):
    """The Parquet cache of every test goes to a folder of the run, never the user's own."""
    import os

    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("xdg-cache"))


@pytest.fixture
def fixture_copy(tmp_path):
    """Copy a fixture file into a temp folder, so tests may modify or corrupt it."""

    def copy(relative: str) -> Path:
        src = FIXTURES / relative
        dst = tmp_path / src.name
        shutil.copyfile(src, dst)
        return dst

    return copy


@pytest.fixture(scope="session")
def quiet():
    """The quiet LayerNorm sweep of 2026-11-29 on the H200 (four shapes, four implementations),
    loaded once: tests read it, none changes it."""
    from nsys_tools.study import folder

    return folder.load(QUIET)


@pytest.fixture(scope="session")
def book(tmp_path_factory):
    """A ledger of four H200 sessions: three quiet (2026-11-29 18:22, 18:23, 18:36) and one under
    load (18:37), written once through ``ledger add``."""
    from nsys_tools.cli import app

    from .cli import CliRunner

    path = tmp_path_factory.mktemp("ledger") / "ledger.sqlite"
    names = ["20261129-182219-quiet", "20261129-182342-quiet", "20261129-183620-quiet", "20261129-183713-loaded"]
    res = CliRunner().invoke(app, ["ledger", "add", *(str(SWEEPS / n) for n in names), "--ledger", str(path)])
    assert res.exit_code == 0, res.stderr
    return path
