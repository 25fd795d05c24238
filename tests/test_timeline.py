"""The trace-event timeline, read back: the trace-event rules (complete events with a duration,
flow ids paired, slices nested on every track) and, per track, the counts and total durations of
the frames it was written from."""

from __future__ import annotations

import gzip
import json
from collections import Counter, defaultdict
from pathlib import Path

import polars as pl
import pytest

import nsys_tools
from nsys_tools.cli import app
from nsys_tools.render import timeline as T

from .cli import CliRunner
from .conftest import FIXTURES

MULTI = FIXTURES / "multi-gpu" / "multi-gpu-nsys2025.3.sqlite"
DEMO = Path(__file__).resolve().parents[1] / "reports" / "sweeps" / "20261129-183449-quiet"
EXPORTS = [
    MULTI,
    FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2024.2.sqlite",
    DEMO / "4096x768.sqlite",
    FIXTURES / "doubled-launch" / "doubled-launch.sqlite",
]
# The doubled-launch fixture's added outer calls start 300 ns before and end 200 ns after the
# real ones (its MANIFEST): on one thread they overlap their neighbours, which real calls cannot.
UNNESTED = {"doubled-launch"}
runner = CliRunner()


def load(path: Path) -> dict:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def ns(us: float) -> int:
    return round(us * 1000)


def tracks(doc: dict) -> dict[tuple[int, int], str]:
    """(pid, tid) -> "process name / thread name", from the metadata events."""
    procs = {e["pid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    return {
        (e["pid"], e["tid"]): f"{procs[e['pid']]} / {e['args']['name']}"
        for e in doc["traceEvents"]
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def check_rules(doc: dict, nested: bool = True) -> None:
    """Trace-event rules: X events carry ts and dur >= 0; B/E match per track; each flow id has
    one start and one end, the start inside a slice of its track and the end at a slice's
    start; on every track, slices nest (none partly overlaps another)."""
    evs = doc["traceEvents"]
    assert {e["ph"] for e in evs} <= {"M", "X", "B", "E", "s", "f"}
    slices = defaultdict(list)
    depth = Counter()
    for e in evs:
        if e["ph"] == "X":
            assert isinstance(e["name"], str) and e["dur"] >= 0 and e["ts"] >= 0
            slices[e["pid"], e["tid"]].append((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])))
        elif e["ph"] in "BE":
            depth[e["pid"], e["tid"]] += 1 if e["ph"] == "B" else -1
            assert depth[e["pid"], e["tid"]] >= 0
    assert not any(depth.values())
    named = tracks(doc)
    for track, spans in slices.items():
        assert track in named, f"track {track} has no thread_name"
        if not nested and named[track].endswith("CUDA API"):
            continue
        spans.sort(key=lambda s: (s[0], -s[1]))
        stack: list[int] = []
        for start, end in spans:
            while stack and stack[-1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1], f"slices overlap without nesting on {named[track]}"
            stack.append(end)
    flows = defaultdict(dict)
    for e in evs:
        if e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]], f"flow id {e['id']} repeats its {e['ph']}"
            flows[e["id"]][e["ph"]] = e
    for ident, pair in flows.items():
        assert set(pair) == {"s", "f"}, f"flow {ident} is not paired"
        s, f = pair["s"], pair["f"]
        assert f["bp"] == "e" and ns(s["ts"]) <= ns(f["ts"])
        assert any(a <= ns(s["ts"]) <= b for a, b in slices[s["pid"], s["tid"]])
        assert any(a == ns(f["ts"]) for a, _ in slices[f["pid"], f["tid"]])


def per_track(doc: dict, cats: set[str]) -> dict[str, tuple[int, int]]:
    """Per track name: (events, total duration in ns) of the X events of ``cats``."""
    named = tracks(doc)
    out = defaultdict(lambda: [0, 0])
    for e in doc["traceEvents"]:
        if e["ph"] == "X" and e["cat"] in cats:
            row = out[named[e["pid"], e["tid"]]]
            row[0] += 1
            row[1] += ns(e["dur"])
    return {k: tuple(v) for k, v in out.items()}


def expected(frame: pl.DataFrame, label: pl.Expr) -> dict[str, tuple[int, int]]:
    grouped = frame.group_by(track=label).agg(n=pl.len(), total=pl.col("duration_ns").sum())
    return {t: (n, total) for t, n, total in grouped.iter_rows()}


def frames_per_track(trace, start_ns=None, end_ns=None):
    """The trace's frames, kept to the window independently of the writer, labelled as its tracks."""

    def window(frame: pl.LazyFrame, start: str, end: str) -> pl.DataFrame:
        if start_ns is not None:
            frame = frame.filter(pl.col(end) >= start_ns)
        if end_ns is not None:
            frame = frame.filter(pl.col(start) <= end_ns)
        return frame.collect()

    procs = dict(trace.processes().select("pid", "process_name").unique("pid").collect().iter_rows())
    gpus = dict(trace.gpus().select("gpu_id", "gpu_name").collect().iter_rows())

    def gpu_track(kinds):
        ops = window(trace.gpu_ops(attributed=False, kinds=kinds), "start_ns", "end_ns")
        label = pl.format("GPU {} ({}) / stream {} (pid {})", "gpu_id", pl.col("gpu_id").replace_strict(gpus), "stream_id", "pid")
        return expected(ops, label)

    def cpu(frame, suffix=""):
        names = pl.col("pid").replace_strict(procs, default="process")
        return expected(frame, pl.format("{} (pid {}) / thread {}" + suffix, names, "pid", "tid"))

    ranges = window(trace.ranges(), "start_ns", "end_ns").filter(pl.col("duration_ns").is_not_null())
    nvtx = {
        **cpu(ranges.filter(pl.col("style") == "pushpop"), " NVTX"),
        **cpu(ranges.filter(pl.col("style") == "startend"), " NVTX start/end"),
    }
    return {
        "kernels": gpu_track(["kernel"]),
        "memops": gpu_track(["memcpy", "memset"]),
        "api": cpu(window(trace.api(), "start_ns", "end_ns"), " CUDA API"),
        "nvtx": nvtx,
    }


CATS = {"kernels": {"kernel", "nccl"}, "memops": {"memcpy", "memset"}, "api": {"cuda_api"}, "nvtx": {"nvtx"}}


@pytest.mark.parametrize("path", EXPORTS, ids=[p.stem for p in EXPORTS])
@pytest.mark.slow
def test_timeline_follows_the_rules_and_equals_the_frames_per_track(path, tmp_path):
    out = tmp_path / "run.json"
    with nsys_tools.open(path) as trace:
        written = T.write(trace, out)
        want = frames_per_track(trace)
        launched = trace.gpu_ops().filter(pl.col("api_start_ns").is_not_null()).collect().height
    doc = load(out)
    check_rules(doc, nested=path.stem not in UNNESTED)
    for what, cats in CATS.items():
        assert per_track(doc, cats) == want[what], what
    assert written.flows == launched == sum(e["ph"] == "s" for e in doc["traceEvents"])
    assert written.bytes == out.stat().st_size
    assert abs(written.estimated_bytes - written.bytes) < 0.1 * written.bytes


def test_multi_gpu_timeline_has_a_track_per_device_and_stream(tmp_path):
    out = tmp_path / "run.json.gz"
    with nsys_tools.open(MULTI) as trace:
        T.write(trace, out)
        streams = trace.gpu_ops(attributed=False).select("gpu_id", "pid", "stream_id").unique().collect().height
        threads = trace.api().select("pid", "tid").unique().collect().height
    doc = load(out)  # gzip, as the name asks
    named = tracks(doc)
    gpu_tracks = [k for k in named if k[0] >= T.GPU_PID]
    assert len(gpu_tracks) == streams
    assert len({k[0] for k in gpu_tracks}) == 2  # the two GPUs
    assert len([v for k, v in named.items() if v.endswith("CUDA API")]) == threads


def test_a_window_keeps_the_events_that_overlap_it(tmp_path):
    with nsys_tools.open(MULTI) as trace:
        starts = trace.kernels().select("start_ns").collect()["start_ns"].sort()
        lo, hi = starts[20], starts[40]
        out = tmp_path / "win.json"
        T.write(trace, out, start_ns=lo, end_ns=hi)
        want = frames_per_track(trace, lo, hi)
    doc = load(out)
    check_rules(doc)
    for what, cats in CATS.items():
        assert per_track(doc, cats) == want[what], what
    assert 21 <= sum(n for n, _ in want["kernels"].values()) < 78
    assert load(out)["otherData"]["window_ns"] == [lo, hi]


def test_the_cli_warns_past_the_size_limit_with_a_window_hint(tmp_path, monkeypatch):
    monkeypatch.setattr(T, "WARN_BYTES", 1000)
    res = runner.invoke(app, ["timeline", str(MULTI), "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 0, res.output
    assert "Warning: the timeline will take about" in res.output and "--within 'step*#3'" in res.output
    check_rules(load(tmp_path / "t.json"))


def test_the_cli_refuses_a_reversed_window_and_bad_input(tmp_path):
    res = runner.invoke(app, ["timeline", str(MULTI), "-o", str(tmp_path / "t.json"), "--from", "5ms", "--to", "4ms"])
    assert res.exit_code == 1 and "is empty" in res.output
    res = runner.invoke(app, ["timeline", str(MULTI), "-o", str(tmp_path / "t.json"), "--from", "soon"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["timeline", str(FIXTURES / "bad-input" / "empty.sqlite"), "-o", str(tmp_path / "t.json")])
    assert res.exit_code == 1 and res.output.startswith("Error: ")
    assert not (tmp_path / "t.json").exists()


def test_the_timeline_chart_draws_the_window_s_operations_and_ranges_by_depth(tmp_path):
    from nsys_tools.render import timeline_chart as C

    with nsys_tools.open(MULTI) as trace:
        starts = trace.kernels().select("start_ns").collect()["start_ns"].sort()
        lo, hi = starts[20], starts[40]
        ops, ranges, origin = C.frames(trace, lo, hi)
        want = trace.gpu_ops(attributed=False).filter((pl.col("end_ns") >= lo) & (pl.col("start_ns") <= hi)).collect()
        spec = C.timeline_chart(trace, start_ns=lo, end_ns=hi).to_dict()
    assert origin == lo and ops.height == want.height
    assert ops["end_ms"].sum() - ops["start_ms"].sum() == pytest.approx(want["duration_ns"].sum() / 1e6)
    # step=k (depth 0) encloses forward and backward (depth 1) on each thread.
    depth = dict(ranges.filter(pl.col("track").str.ends_with("start/end").not_()).select("name", "depth").unique().iter_rows())
    assert depth["forward"] == depth["backward"] == 1 and all(v == 0 for k, v in depth.items() if k.startswith("step="))
    assert sorted(len(rows) for rows in spec["datasets"].values()) == sorted([ops.height, ranges.height])
    res = runner.invoke(app, ["timeline", str(MULTI), "-o", str(tmp_path / "t.json"), "--chart", str(tmp_path / "t.svg")])
    assert res.exit_code == 2


@pytest.mark.slow
def test_the_torch_training_capture_s_timeline_equals_its_frames(tmp_path):
    from .torch_train import exports

    path = exports(tmp_path)["a"]
    out = tmp_path / "run-a.json.gz"
    with nsys_tools.open(path) as trace:
        T.write(trace, out)
        want = frames_per_track(trace)
    doc = load(out)
    check_rules(doc)
    for what, cats in CATS.items():
        assert per_track(doc, cats) == want[what], what


def test_the_cli_writes_one_step_of_a_training_run(tmp_path):
    """``--within 'step*#3'``: the third step's NVTX range bounds the timeline, as the views'
    window takes it; its kernels are the frames' kernels inside that window."""
    from nsys_tools.read.window import resolve_window

    from .torch_train import exports

    path = exports(tmp_path)["a"]
    out = tmp_path / "step3.json"
    res = runner.invoke(app, ["timeline", str(path), "-o", str(out), "--within", "step*#3"])
    assert res.exit_code == 0, res.output
    with nsys_tools.open(path) as trace:
        window = resolve_window(trace, within="step*#3")
        step = trace.ranges(columns=["range", "start_ns", "end_ns"]).filter(pl.col("range") == "step 2").collect()
        want = frames_per_track(trace, window.start_ns, window.end_ns)
    assert (window.start_ns, window.end_ns) == (step["start_ns"].item(), step["end_ns"].item())
    doc = load(out)
    check_rules(doc)
    assert doc["otherData"]["window_ns"] == [window.start_ns, window.end_ns]
    assert per_track(doc, CATS["kernels"]) == want["kernels"]
