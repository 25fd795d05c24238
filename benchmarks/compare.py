"""The working tree against a base revision, side by side in one run.

    python -m benchmarks.compare --base REV [--sizes 0.3M,3.07M] [--cases GLOB,...] [-n 5]
                                 [--nsys PATH] [--pin 0,1] [--base-python PY] [--out reports/bench]

The base is checked out in a temporary git worktree. Every case is a whole ``nsys-tools``
command in a fresh process, run as ``python -P -m nsys_tools`` with ``PYTHONPATH`` set to one
tree, so each side imports its own code whatever the current folder (both trees' bytecode is
compiled first, as an installed package has it). The sides take turns (base, tree, then tree,
base, ...) after one warm-up run each, and each run's wall time, CPU time (user + system) and
peak resident memory come from the kernel's accounting of that process (``wait4``). First reads
run with ``NSYS_TOOLS_CACHE=0``; ``repeat-read`` cases with a warm cache of each side's own.
With ``--nsys``, ``nsys stats`` (its kernel summary per NVTX range, what ``report`` answers) runs
in the same turns on the first-read cases, and its rows are compared with the tree's.

Results go to ``OUT/<time>-<tree>-vs-<base>.md`` (the machine, both commits, medians and
min-max, per-pair ratios) and ``.jsonl`` beside it (one raw line per run).
"""

from __future__ import annotations

import argparse
import contextlib
import fnmatch
import hashlib
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from . import exports

ROOT = exports.ROOT


@dataclass(frozen=True)
class Case:
    name: str
    args: tuple[str, ...]  # after ``python -m nsys_tools``; "{export}" is the export's path
    size: str | None  # the export's size, or None for the bundled 2-GPU capture
    cache: bool = False  # True: a warm cache (the warm-up fills it); else NSYS_TOOLS_CACHE=0
    nsys: bool = False  # ``nsys stats`` answers the same table

    def export(self, folder: Path) -> Path:
        return exports.SMALL if self.size is None else exports.build(self.size, folder)


def cases(sizes: list[str]) -> list[Case]:
    """First reads at every size; every other whole-run view, ``summary`` and ``diagnose`` at the smallest;
    ``report`` on the small bundled capture; the report again from a warm cache at every size."""
    csv = ("--format", "csv")
    out = [Case(f"first-read@{s}", ("report", "{export}", *csv), s, nsys=True) for s in sizes]
    from nsys_tools import views  # the tree's views (a view the base lacks fails there, and says so)

    least = min(sizes, key=exports.kernels)
    out += [Case(f"view-{v}@{least}", ("report", "{export}", "--view", v, *csv), least) for v in views.names() if v != "kernels"]
    out += [Case(f"summary@{least}", ("summary", "{export}"), least)]
    out += [Case(f"diagnose@{least}", ("diagnose", "{export}", "--format", "json"), least)]
    out += [Case("small-report", ("report", "{export}", *csv), None)]
    out += [Case(f"repeat-read@{s}", ("report", "{export}", *csv), s, cache=True) for s in sizes]
    return out


@dataclass(frozen=True)
class Side:
    name: str  # "base", "tree" or "nsys"
    root: Path | None  # the tree it imports (None: nsys)
    python: str


def measure(argv: list[str], env: dict, cwd: Path, stdout: Path, pin: set[int] | None) -> dict:
    """Run ``argv`` once: wall, user and system seconds and peak RSS (MiB) of that process (and
    any it waited for), its exit code, and the hash of what it wrote to ``stdout``."""
    start = time.perf_counter()
    with open(stdout, "wb") as out:
        proc = subprocess.Popen(
            argv,
            stdout=out,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            preexec_fn=(lambda: os.sched_setaffinity(0, pin)) if pin else None,
        )
        err = proc.stderr.read()
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    proc.stderr.close()
    return {
        "wall_s": round(wall, 4),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 4),
        "user_s": round(usage.ru_utime, 4),
        "sys_s": round(usage.ru_stime, 4),
        "peak_mib": round(usage.ru_maxrss / 1024, 1),
        "rc": proc.returncode,
        "md5": hashlib.md5(stdout.read_bytes()).hexdigest(),
        "stderr": err.decode("utf-8", "replace")[-300:] if proc.returncode else "",
    }


def command(side: Side, case: Case, export: Path, work: Path) -> tuple[list[str], dict, Path]:
    """The argv, environment and output file of one run of ``case`` on ``side``."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NSYS_TOOLS_CACHE", "XDG_CACHE_HOME")}
    if side.root is None:  # nsys stats
        from nsys_tools.run.bench import nsys_stats_cmd, nsys_stats_output

        prefix = work / f"nsys-{case.size}"
        return nsys_stats_cmd(side.python, export, prefix), env, nsys_stats_output(prefix)
    env["PYTHONPATH"] = str(side.root)
    if case.cache:  # each side its own cache: its own link to the export (``linked``), its own cache folder
        export, env["XDG_CACHE_HOME"] = work / side.name / export.name, str(work / side.name / "cache")
    else:
        env["NSYS_TOOLS_CACHE"] = "0"
    args = [a.replace("{export}", str(export)) for a in case.args]
    return [side.python, "-P", "-m", "nsys_tools", *args], env, work / f"{side.name}.out"


def run_case(case: Case, sides: list[Side], folder: Path, runs: int, pin: set[int] | None, log) -> list[dict]:
    """One warm-up run per side, then ``runs`` turns of all sides, the order reversed each turn."""
    export = case.export(folder)
    lines = []
    with tempfile.TemporaryDirectory(prefix="bench-", dir=folder) as tmp:
        work = Path(tmp)
        if case.cache:  # all links first: a new link changes the file's status time, which a cache checks
            for side in sides:
                (work / side.name).mkdir()
                os.link(export, work / side.name / export.name)
        for turn in range(runs + 1):
            done = {}
            for side in sides if turn % 2 else sides[::-1]:
                argv, env, out = command(side, case, export, work)
                out.unlink(missing_ok=True)  # nsys skips a report whose output exists
                done[side.name] = measure(argv, env, work, work / f"{side.name}.stdout" if side.root is None else out, pin)
                if side.root is None:  # nsys writes its CSV to a file of its own
                    done[side.name]["md5"] = hashlib.md5(out.read_bytes()).hexdigest() if out.exists() else ""
                    nsys_csv = out
            if "nsys" in done:  # the tree's rows against nsys' (range, kernel, instances, total, median, min, max)
                from nsys_tools.run.bench import compare

                done["nsys"]["rows_differ"] = compare(work / "tree.out", nsys_csv, nsys_format=True)
            for side in sides:
                line = {"case": case.name, "side": side.name, "turn": turn, "warmup": turn == 0, **done[side.name]}
                lines.append(line)
                log(line)
    return lines


def summarize(lines: list[dict], case: str, side: str, key: str) -> tuple[float, float, float] | None:
    values = [x[key] for x in lines if x["case"] == case and x["side"] == side and not x["warmup"]]
    return (min(values), statistics.median(values), max(values)) if values else None


def ratios(lines: list[dict], case: str, a: str, b: str, key: str) -> tuple[float, float, float] | None:
    """``a``'s figure over ``b``'s, turn by turn: min, median, max."""
    by = {(x["side"], x["turn"]): x[key] for x in lines if x["case"] == case and not x["warmup"]}
    pairs = [by[(a, t)] / by[(b, t)] for s, t in by if s == a and (b, t) in by and by[(b, t)]]
    return (min(pairs), statistics.median(pairs), max(pairs)) if pairs else None


def _mmm(v, fmt="{:.2f}") -> str:
    return "–" if v is None else f"{fmt.format(v[1])} ({fmt.format(v[0])}–{fmt.format(v[2])})"


def table(lines: list[dict], names: list[str], nsys: bool) -> str:
    head = [
        "case",
        "base wall s",
        "tree wall s",
        "tree/base wall",
        "base CPU s",
        "tree CPU s",
        "base peak MiB",
        "tree peak MiB",
        "same output",
    ]
    if nsys:
        head += ["nsys wall s", "nsys/tree wall", "nsys peak MiB", "rows ≠ nsys"]
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for case in names:
        md5 = {(x["side"], x["md5"]) for x in lines if x["case"] == case and x["side"] != "nsys"}
        failed = any(x["rc"] for x in lines if x["case"] == case)
        same = "exit ≠ 0" if failed else ("yes" if len({m for _, m in md5}) == 1 else "no")
        cells = [
            case,
            _mmm(summarize(lines, case, "base", "wall_s")),
            _mmm(summarize(lines, case, "tree", "wall_s")),
            _mmm(ratios(lines, case, "tree", "base", "wall_s")),
            _mmm(summarize(lines, case, "base", "cpu_s")),
            _mmm(summarize(lines, case, "tree", "cpu_s")),
            _mmm(summarize(lines, case, "base", "peak_mib"), "{:.0f}"),
            _mmm(summarize(lines, case, "tree", "peak_mib"), "{:.0f}"),
            same,
        ]
        if nsys:
            differ = {x.get("rows_differ") for x in lines if x["case"] == case and x["side"] == "nsys"} - {None}
            cells += [
                _mmm(summarize(lines, case, "nsys", "wall_s")),
                _mmm(ratios(lines, case, "nsys", "tree", "wall_s"), "{:.1f}"),
                _mmm(summarize(lines, case, "nsys", "peak_mib"), "{:.0f}"),
                ", ".join(map(str, sorted(differ))) or "–",
            ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def _git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


def revision(root: Path = ROOT) -> str:
    """The short commit, with ``+changes`` where tracked files differ from it."""
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "."], cwd=root).returncode != 0
    return _git("rev-parse", "--short", "HEAD", cwd=root) + ("+changes" if dirty else "")


@contextlib.contextmanager
def worktree(rev: str) -> Iterator[Path]:
    """``rev`` checked out in a temporary git worktree, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="bench-base-"))
    _git("worktree", "add", "--detach", "--force", str(path), rev)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=ROOT, capture_output=True)
        shutil.rmtree(path, ignore_errors=True)


def machine(pin: set[int] | None) -> dict:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        "",
    )
    mem = next((line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines() if line.startswith("MemTotal")), "0")
    import polars

    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "pinned": ",".join(map(str, sorted(pin))) if pin else "no",
        "memory_gib": round(int(mem) / 2**20, 1),
        "os": platform.platform(),
        "python": platform.python_version(),
        "polars": polars.__version__,
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def write(out: Path, lines: list[dict], names: list[str], info: dict, nsys: bool) -> Path:
    """The report and its raw lines; returns the report's path."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M")
    stem = out / f"{stamp}-{info['tree']}-vs-{info['base']}"
    out.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    text = [
        f"# {info['tree']} against {info['base']}",
        "",
        f"`{info['command']}`, {info['started']} to {info['ended']} UTC.",
        "",
        *(f"- {k}: {v}" for k, v in info["machine"].items()),
        f"- load average at the end: {info['load_after']}",
        "",
        f"Medians (min–max) of {info['runs']} runs per side, taking turns after one warm-up each; ratios pair each run with"
        " the other side's in the same turn. CPU is user + system time of the process; peak is its largest resident size."
        " Same output: the tree's and the base's outputs are byte for byte equal.",
        "",
        table(lines, names, nsys),
        "",
        f"Raw lines: `{stem.with_suffix('.jsonl').name}`.",
        "",
    ]
    stem.with_suffix(".md").write_text("\n".join(text))
    return stem.with_suffix(".md")


PATH_OPTIONS = ("--nsys", "--python", "--base-python", "--exports", "--out")


def shown(argv: list[str]) -> str:
    """The command as the report records it: the paths of this machine's executables and folders
    by their last part (``--nsys /opt/.../nsys`` as ``--nsys nsys``), the rest as given."""
    out, hide = [], False
    for arg in argv:
        flag, eq, value = arg.partition("=")
        if hide:
            arg = Path(arg).name
        elif eq and flag in PATH_OPTIONS:
            arg = f"{flag}={Path(value).name}"
        out.append(arg)
        hide = arg in PATH_OPTIONS
    return "python -m benchmarks.compare " + " ".join(out)


def nsys_version(nsys: str | None) -> str | None:
    """``nsys --version``'s line, or None without one."""
    if not nsys:
        return None
    try:
        return subprocess.run([nsys, "--version"], capture_output=True, text=True, timeout=60).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare with (a commit, branch or tag)")
    parser.add_argument("--sizes", default="0.3M", help="export sizes in kernels, comma-separated (0.3M,3.07M)")
    parser.add_argument("--cases", default="*", help="glob patterns of case names, comma-separated")
    parser.add_argument("-n", "--runs", type=int, default=5, help="counted runs per side (default 5)")
    parser.add_argument("--nsys", help="an nsys executable: nsys stats runs beside the first reads")
    parser.add_argument("--pin", help="run every command on these CPUs (as taskset -c: 0,1)")
    parser.add_argument("--python", default=sys.executable, help="the tree's interpreter (default: this one)")
    parser.add_argument("--base-python", help="the base's interpreter (default: the tree's)")
    parser.add_argument("--exports", type=Path, default=None, help="where the exports are built and kept")
    parser.add_argument("--out", type=Path, default=ROOT / "reports" / "bench", help="where results are written")
    args = parser.parse_args(argv)
    pin = {int(c) for c in args.pin.split(",")} if args.pin else None
    sizes = args.sizes.split(",")
    patterns = args.cases.split(",")
    chosen = [c for c in cases(sizes) if any(fnmatch.fnmatch(c.name, p) for p in patterns)]
    if not chosen:
        parser.error(f"no case matches {args.cases!r}: choose from {', '.join(c.name for c in cases(sizes))}")
    folder = args.exports or exports.default_folder()
    folder.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    info = {
        "command": shown(argv if argv is not None else sys.argv[1:]),
        "started": started.strftime("%Y-%m-%d %H:%M"),
        "machine": machine(pin) | ({"nsys": v} if (v := nsys_version(args.nsys)) else {}),
        "tree": revision(),
        "base": _git("rev-parse", "--short", args.base),
        "runs": args.runs,
    }
    lines: list[dict] = []
    with worktree(args.base) as base:
        for root, py in ((ROOT, args.python), (base, args.base_python or args.python)):
            subprocess.run(
                [
                    py,
                    "-m",
                    "compileall",
                    "-q",
                    *(str(root / d) for d in ("nsys_tools", "capture", "kernels") if (root / d).is_dir()),
                ],
                check=False,
                stdout=subprocess.DEVNULL,
            )
        for case in chosen:
            sides = [Side("base", base, args.base_python or args.python), Side("tree", ROOT, args.python)]
            if args.nsys and case.nsys:
                sides.append(Side("nsys", None, args.nsys))
            print(f"{case.name}: {' '.join(case.args)} on {case.export(folder).name}", file=sys.stderr, flush=True)
            lines += run_case(case, sides, folder, args.runs, pin, lambda x: print(json.dumps(x), file=sys.stderr, flush=True))
    info["ended"] = datetime.now(timezone.utc).strftime("%H:%M")
    info["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
    report = write(args.out, lines, [c.name for c in chosen], info, bool(args.nsys))
    print(report.read_text())
    print(f"Wrote {report}", file=sys.stderr)


if __name__ == "__main__":
    main()
