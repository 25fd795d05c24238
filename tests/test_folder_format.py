"""The capture folder's files: one typed parse, one error per bad field, and what is written reads back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from nsys_tools.errors import BadExport
from nsys_tools.folder_format import HarnessRecord, Manifest, Spec, UnitEntry

QUIET = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-182219-quiet"


def test_a_committed_manifest_reads_typed():
    m = Manifest.read(QUIET)
    assert m.kind == "sweep" and m.spec.control == "triton" and m.spec.rounds == 3  # manifest.json: spec
    assert m.gpu_before.name == "NVIDIA H200" and m.gpu_before.max_sm_mhz == "1980" and m.gpu_before.compute_pids == []
    assert set(m.units) == {"4096x768", "8192x768", "1024x2048", "4096x4096"} and m.units["4096x768"].status == "ok"


def test_a_field_of_the_wrong_type_is_one_error_naming_it(tmp_path):
    data = json.loads((QUIET / "manifest.json").read_text())
    data["spec"]["op"] = 7
    with pytest.raises(BadExport, match=r"manifest\.json: has spec\.op of type int, not text"):
        Manifest.parse(tmp_path / "manifest.json", data)
    data["spec"]["op"], data["shapes"]["4096x768"]["orders"] = None, "ours,torch"
    with pytest.raises(BadExport, match=r"has 4096x768\.orders of type str, not a list of lists of text"):
        Manifest.parse(tmp_path / "manifest.json", data)


def test_a_null_field_reads_as_absent(tmp_path):
    data = {"kind": None, "spec": {"l2": None, "shapes": None}, "shapes": {}}
    m = Manifest.parse(tmp_path / "manifest.json", data)
    assert m.kind == "sweep" and m.spec.l2 is None and m.spec.shapes == []


def test_what_the_runner_writes_reads_back(tmp_path):
    m = Manifest(id="s", kind="run", spec=Spec(program=["./bench"], name="capture", control="torch"))
    m.units["capture"] = UnitEntry(status="ok", commit="abc", ranges={"op/torch/8x8/cold": 3})
    (tmp_path / "manifest.json").write_text(json.dumps(m.to_json()))
    back = Manifest.read(tmp_path)
    assert back.to_json() == m.to_json() and "captures" in m.to_json() and "shapes" not in m.to_json()


def test_a_harness_record_without_spans_is_refused(tmp_path):
    file = tmp_path / "4096x768.harness.json"
    record = json.loads((QUIET / "4096x768.harness.json").read_text())
    assert HarnessRecord.read(QUIET / "4096x768.harness.json").gpu_name == "NVIDIA H200"
    del record["spans"]
    file.write_text(json.dumps(record))
    with pytest.raises(BadExport, match="has no 'spans' entry"):
        HarnessRecord.read(file)
