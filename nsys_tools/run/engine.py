"""Where per-export work runs: threads in this process, or the workers of a Dask cluster.

A report over many exports is one task per export, each returning a small mergeable part, and
one exact merge on the client. ``Local`` and ``Dask`` differ only in how they schedule those
tasks; both run each one through ``run_task``, so errors read the same (with ``keep_going``, a
task that cannot read its export returns the error in its place), and both return the parts in
the order of the inputs, so the merge sees the same thing either way.

``connect(spec)`` gives the engine for ``--scheduler``: none for this process,
``local:N`` for a cluster of N worker processes on this machine, or the address of a running
Dask scheduler (``tcp://HOST:PORT``), whose workers must see the exports at the same paths.
Dask is an optional dependency: ``pip install 'nsys-tools[dask]'``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

from ..errors import BadExport, NsysToolsError, SchedulerError

T = TypeVar("T")
R = TypeVar("R")
Progress = Callable[[int, int], None]
CONNECT_TIMEOUT_S = 10


def cores() -> int:
    """The cores this process may run on (its CPU affinity, so ``taskset`` is honoured)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def run_task(fn: Callable[[T], R], item: T, where: str = "", keep_going: bool = False) -> R | NsysToolsError:
    """``fn(item)``; a file that cannot be read becomes an error naming it (and ``where`` it ran),
    raised, or returned with ``keep_going``."""
    try:
        return fn(item)
    except NsysToolsError as err:
        failed = type(err)(err.path, f"{err.problem} (read on {where})", err.hint) if where else err
    except OSError as exc:
        place = f" on {where}" if where else ""
        failed = BadExport(
            Path(exc.filename or str(item)), f"cannot be read{place} ({exc.strerror or exc})", "check the path and permissions"
        )
    if keep_going:
        return failed
    raise failed


class Local:
    """Tasks on a pool of threads in this process (Polars and SQLite release the GIL)."""

    def __init__(self, workers: int | None = None):
        self.workers = workers or cores()

    def map(self, fn: Callable[[T], R], items: Sequence[T], progress: Progress | None = None, keep_going: bool = False) -> list:
        out: list = []
        if len(items) == 1:  # no pool for one task (a single small export answers in a tenth of a second)
            out.append(run_task(fn, items[0], keep_going=keep_going))
            if progress:
                progress(1, 1)
            return out
        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(items)))) as pool:
            for result in pool.map(lambda item: run_task(fn, item, keep_going=keep_going), items):
                out.append(result)
                if progress:
                    progress(len(out), len(items))
        return out


def _on_worker(item, fn, keep_going):
    from distributed import get_worker

    return run_task(fn, item, f"worker {get_worker().address}", keep_going)


class Dask:
    """Tasks on the workers of a ``distributed.Client``, one per item, results gathered as they
    complete; the first failure cancels the rest and is raised here."""

    def __init__(self, client):
        self.client = client

    def map(self, fn: Callable[[T], R], items: Sequence[T], progress: Progress | None = None, keep_going: bool = False) -> list:
        from distributed import as_completed

        futures = self.client.map(_on_worker, list(items), fn=fn, keep_going=keep_going, pure=False)
        order = {f.key: i for i, f in enumerate(futures)}
        out: dict[int, object] = {}
        try:
            for future in as_completed(futures):
                out[order[future.key]] = future.result()
                if progress:
                    progress(len(out), len(items))
        finally:
            self.client.cancel([f for f in futures if not f.done()])
        return [out[i] for i in range(len(items))]


def parse(spec: str) -> tuple[str, int | str]:
    """``("local", N)`` or ``("address", spec)``; ValueError for anything else."""
    if spec.startswith("local:"):
        n = spec.removeprefix("local:")
        if not n.isdigit() or int(n) < 1:
            raise ValueError(f"{spec!r}: local:N takes a number of workers of at least 1, e.g. local:4")
        return "local", int(n)
    if "://" in spec and spec.split("://", 1)[1]:
        return "address", spec
    raise ValueError(f"{spec!r}: give a scheduler address (tcp://HOST:PORT) or local:N")


@contextmanager
def connect(spec: str | None, threads_per_worker: int | None = None) -> Iterator[Local | Dask]:
    """The engine for ``spec`` (see the module's docstring), shut down on exit. Each of N local
    workers gets ``threads_per_worker`` threads for Polars and SQLite reads (default: this
    machine's cores divided among them)."""
    if spec is None:
        yield Local()
        return
    kind, value = parse(spec)
    try:
        import logging

        from distributed import Client, LocalCluster
    except ImportError:
        raise SchedulerError(None, "--scheduler needs Dask, which is not installed", "pip install 'nsys-tools[dask]'") from None
    if kind == "local":
        threads = threads_per_worker or max(1, cores() // value)
        cluster = LocalCluster(
            n_workers=value,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.CRITICAL,
            env={"POLARS_MAX_THREADS": str(threads)},
        )
        with cluster, Client(cluster) as client:
            yield Dask(client)
        return
    try:
        client = Client(value, timeout=CONNECT_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        raise SchedulerError(
            None,
            f"no Dask scheduler answered at {value} within {CONNECT_TIMEOUT_S} s ({type(exc).__name__})",
            "start one (dask scheduler, dask worker ADDRESS) or use --scheduler local:N",
        ) from None
    with client:
        yield Dask(client)
