"""The contention verdict of a sweep folder (study.verdict): other processes, kernel-time tails, clocks."""

from __future__ import annotations

import json
import shutil

import pytest

from nsys_tools.study import folder as sweep
from nsys_tools.study import verdict

from .conftest import LOADED, MATMUL_BF16, QUIET


def test_quiet_and_loaded_verdicts(quiet):
    q = verdict.judge(quiet)
    assert q.quiet and not q.reasons and q.clocks["sm_mhz_median"] == 1980
    loaded = verdict.judge(sweep.load(LOADED))
    assert not loaded.quiet
    assert loaded.reasons[0].startswith("another process was on the GPU (pid ")
    assert "took more than twice their median" in loaded.reasons[1]
    assert loaded.tails["outlier_share"].max() > verdict.MAX_OUTLIER_SHARE


def test_verdict_flags_low_clocks(tmp_path):
    folder = tmp_path / "s"
    shutil.copytree(QUIET, folder)
    for h in folder.glob("*.harness.json"):
        data = json.loads(h.read_text())
        data["clocks"]["sm_mhz"] = [345] * len(data["clocks"]["sm_mhz"])
        h.write_text(json.dumps(data))
    v = verdict.judge(sweep.load(folder))
    assert not v.quiet and "345 MHz" in v.reasons[0]


@pytest.mark.parametrize(("bits", "quiet"), [(0x4, True), (0x20, True), (0x0, False), (-1, False)])
@pytest.mark.slow
def test_a_clock_held_by_the_gpus_own_power_cap_is_not_contention(tmp_path, bits, quiet):
    """The bf16 matmul drew the H200 to 704 W and its clock to 1515 MHz. Where NVML says the GPU's own
    power or thermal limit held the clock, the session stays quiet with a note; otherwise it is flagged."""
    folder = tmp_path / "s"
    shutil.copytree(MATMUL_BF16, folder)
    assert not verdict.judge(sweep.load(folder)).quiet  # captured before the reasons were sampled
    for h in folder.glob("*.harness.json"):
        data = json.loads(h.read_text())
        data["clocks"]["reasons"] = [bits] * len(data["clocks"]["sm_mhz"])
        h.write_text(json.dumps(data))
    v = verdict.judge(sweep.load(folder))
    assert v.quiet is quiet
    assert ("1515 MHz" in (v.notes if quiet else v.reasons)[0]) and ("power or thermal limit" in v.notes[0] if quiet else True)
