"""Frames split into hash buckets, held in memory up to a budget and on disk past it.

The store behind reading an export of any size in bounded memory (``chunked.py``): each frame
added is split by an integer key column modulo the number of buckets; the pieces stay in memory
until they hold ``budget`` bytes, then all of them are written into a temporary folder, one Arrow
IPC file per stream and bucket at each flush, and memory is free again. ``take`` gives back everything some
buckets received, from memory and disk, in the order it was added; ``groups`` says which buckets
to take together so that each take is about a given size. This is the partitioning step of a
Grace hash join (Kitsuregawa et al., 1983): rows with equal keys land in the same bucket, so two
streams can be joined a few buckets at a time. Choose many buckets (an upper bound of the data
over the size wanted) and let ``groups`` merge them by the sizes actually seen.
"""

from __future__ import annotations

import os
import tempfile
from collections import defaultdict
from pathlib import Path

import polars as pl

from ..files import track, untrack, writing

ROOM = "point TMPDIR at a folder with room (spill files of a large export)"


class Spill:
    """Named streams of frames, bucketed by ``key`` modulo ``buckets``. Use as a context manager:
    the temporary folder, if one was needed, is removed on exit."""

    def __init__(self, buckets: int, key: str, budget: int):
        self.buckets, self.key, self.budget = buckets, key, budget
        self.held: dict[tuple[str, int], list[pl.DataFrame]] = defaultdict(list)
        self.files: dict[tuple[str, int], list[Path]] = defaultdict(list)
        self.schemas: dict[str, pl.Schema] = {}
        self.sizes = [0] * buckets  # bytes each bucket received, all streams together
        self.held_bytes = 0
        self.flushes = 0
        self._folder: tempfile.TemporaryDirectory | None = None

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc) -> None:
        self.held.clear()
        if self._folder is not None:
            self._folder.cleanup()
            untrack(self._folder.name)

    def add(self, stream: str, df: pl.DataFrame) -> None:
        """Split ``df`` into buckets (rows with a null key go to bucket 0; a frame without the
        key column is spread evenly: its rows need not meet any other's) and keep the pieces."""
        if df.height or stream not in self.schemas:  # an empty frame's columns may be untyped
            self.schemas[stream] = df.schema
        if self.key in df.columns:
            bucket = (pl.col(self.key) % self.buckets).fill_null(0).alias("_bucket")
        else:
            bucket = (pl.int_range(pl.len(), dtype=pl.Int64) % self.buckets).alias("_bucket")
        for (b,), piece in df.with_columns(bucket).partition_by("_bucket", as_dict=True, include_key=False).items():
            self.held[stream, b].append(piece)
            size = piece.estimated_size()
            self.held_bytes += size
            self.sizes[b] += size
        if self.held_bytes > self.budget:
            self.flush()

    def groups(self, size: int) -> list[list[int]]:
        """The buckets in runs of consecutive ones that together received at most ``size`` bytes
        (a bucket larger than that alone)."""
        runs: list[list[int]] = [[]]
        total = 0
        for b, n in enumerate(self.sizes):
            if runs[-1] and total + n > size:
                runs.append([])
                total = 0
            runs[-1].append(b)
            total += n
        return runs

    def take(self, stream: str, buckets: list[int]) -> pl.DataFrame:
        """Everything ``stream`` put into ``buckets``, each bucket's spilled rows first (they
        were added first), then what is still in memory; one contiguous frame. Their share is
        released."""
        pieces = []
        for b in buckets:
            pieces += [pl.read_ipc(path) for path in self.files.pop((stream, b), [])]
            pieces += self.held.pop((stream, b), [])
        if not pieces:
            return pl.DataFrame(schema=self.schemas.get(stream, {}))
        return pl.concat(pieces, how="vertical", rechunk=True)

    def flush(self) -> None:
        """Write what is held to disk and free its memory."""
        if self._folder is None:  # named by its owner, so that the next run removes it if this one is killed
            with writing(tempfile.gettempdir(), ROOM):
                self._folder = tempfile.TemporaryDirectory(prefix=f"nsys-tools-spill-{os.getpid()}-")
            track(self._folder.name)
        # One bucket at a time: each copy is written and dropped before the next is made.
        for stream, b in list(self.held):
            path = Path(self._folder.name) / f"{stream}-{b}-{self.flushes}.arrow"
            with writing(path, ROOM):
                pl.concat(self.held.pop((stream, b)), how="vertical", rechunk=True).write_ipc(path, compression="uncompressed")
            self.files[stream, b].append(path)
        self.held.clear()
        self.held_bytes = 0
        self.flushes += 1
