"""A plugin that runs without a GPU: y = 2x on NumPy arrays, for the plugin and harness tests.

``good`` writes its output, ``narrow`` refuses rows wider than 8, and ``raises`` has a factory
that fails, as a broken kernel build would.
"""

from __future__ import annotations

import numpy as np

from nsys_tools.plugin import Impl, Op


def make_good(buffers, factor: float = 2.0):
    x, y = buffers.x, buffers.y

    def launch() -> None:
        np.multiply(x, factor, out=y)

    return launch


def make_raises(buffers):
    raise ValueError("the kernel did not compile")


class Scale(Op):
    name = "scale"
    title = "Scale"
    default_shapes = ("4x8", "2x16")
    control = "good"

    def inputs(self, shape, device):
        return {"x": np.random.default_rng(0).standard_normal(shape)}

    def outputs(self, shape, device):
        return {"y": np.empty(shape)}

    def poison(self, outputs):
        for y in outputs.values():
            y.fill(np.nan)

    def error(self, out, expected):
        return float(np.linalg.norm(out - expected) / np.linalg.norm(expected)) if np.isfinite(out).all() else float("inf")

    def reference(self, buffers):
        return {"y": 2.0 * buffers.x}

    def bytes_moved(self, shape):
        return 2 * shape[0] * shape[1] * 8

    def impls(self):
        return [
            Impl("good", make_good, "control", "numpy multiply into y"),
            Impl("narrow", make_good, limit=lambda s: f"rows of at most 8, got {s[1]}" if s[1] > 8 else None),
            Impl("raises", make_raises),
        ]


OPS = [Scale()]
