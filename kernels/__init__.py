"""LayerNorm forward implementations: ours (CUDA C++ through CuPy) and the controls."""

from .registry import IMPLS, Impl, Problem, UnsupportedShape, get, parse_impls, parse_shape

__all__ = ["IMPLS", "Impl", "Problem", "UnsupportedShape", "get", "parse_impls", "parse_shape"]
