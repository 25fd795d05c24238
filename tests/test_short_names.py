"""Short names stay unique: ``tables.unique_short_names`` on generated families of templated C++
kernel names (Hypothesis), and ``--names short`` on real exports never merges rows that the
default (demangled) names keep apart."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsys_tools.render.tables import base_name, unique_short_names
from nsys_tools.run.report import view_table

from .conftest import FIXTURES
from .test_views import EXPORTS, REFERENCE

IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,11}", fullmatch=True)
SCALAR = st.sampled_from(["float", "double", "int", "c10::Half", "c10::BFloat16", "long", "(bool)0", "(bool)1"])
NUMBER = st.integers(0, 4096).map(str)


@st.composite
def template_args(draw, depth: int = 0) -> str:
    """Template arguments as demanglers print them: types, numbers, nested templates, lambdas."""
    parts = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["scalar", "number", "nested", "lambda"] if depth < 2 else ["scalar", "number"]))
        if kind == "scalar":
            parts.append(draw(SCALAR))
        elif kind == "number":
            parts.append(draw(NUMBER))
        elif kind == "nested":
            parts.append(f"{draw(IDENT)}::{draw(IDENT)}<{draw(template_args(depth + 1))}>")
        else:
            parts.append(f"{draw(IDENT)}(int)::[lambda() (instance {draw(NUMBER)})]")
    return ", ".join(parts)


@st.composite
def families(draw) -> list[str]:
    """Kernels of one or a few templates, as one program launches them: a shared namespace,
    function and parameter list, differing in the template arguments (often only at the end)."""
    names = []
    for _ in range(draw(st.integers(1, 3))):
        scope = "::".join(draw(st.lists(IDENT, min_size=0, max_size=3)))
        func = draw(IDENT)
        params = draw(st.sampled_from(["(int, T1 *)", "(T1, T2, const T3 *)", "()", "(F, long)"]))
        shared = draw(template_args())
        for _ in range(draw(st.integers(1, 6))):
            tail = draw(st.one_of(NUMBER, template_args()))
            names.append(f"void {scope + '::' if scope else ''}{func}<{shared}, {tail}>{params}")
    return names


@settings(max_examples=300, deadline=None)
@given(families(), st.randoms(use_true_random=False))
@pytest.mark.slow
def test_unique_short_names_keep_distinct_names_distinct(names, rnd):
    shown = unique_short_names(names)
    distinct = set(names)
    assert set(shown) == distinct
    assert len(set(shown.values())) == len(distinct)  # no two names alike
    for name, text in shown.items():
        assert text.startswith(base_name(name)) and len(text) <= len(base_name(name)) + 48
    shuffled = list(names)
    rnd.shuffle(shuffled)
    assert unique_short_names(shuffled) == shown  # the same names, in any order, the same result
    # With the short names nsys records (one per template): still all distinct, each from its own.
    nsys_short = {n: base_name(n) for n in distinct}
    assert len(set(unique_short_names(names, nsys_short).values())) == len(distinct)


def test_names_differing_only_at_the_end_show_the_difference():
    """Three thrust for_each kernels that differ only in their last characters (a real report's
    case): one row each, told apart by what differs."""
    stem = (
        "void thrust::cuda_cub::core::for_each_kernel<thrust::cuda_cub::__parallel_for::ParallelForPolicy<F, long>, F>(F, long)"
    )
    names = [f"{stem} [F = for_each_f<unary_{k}>]" for k in "abc"]
    shown = unique_short_names(names, dict.fromkeys(names, "for_each_kernel"))
    assert [shown[n] for n in names] == ["for_each_kernel […a…]", "for_each_kernel […b…]", "for_each_kernel […c…]"]
    long = [f"void k<{c * 50}, int>(int)" for c in "abc"]  # differing over 50 characters: numbered
    assert [unique_short_names(long)[n] for n in sorted(long)] == ["k", "k #2", "k #3"]


@pytest.mark.parametrize("name", [n for n in EXPORTS if n not in REFERENCE])
def test_names_short_never_merges_rows_the_default_keeps_apart(name):
    path = EXPORTS[name]
    full = view_table([path], "kernels")
    short = view_table([path], "kernels", names="short")
    assert short.height == full.height and short["kernel"].n_unique() == full["kernel"].n_unique()
    key = ["range", "instances", "total_ns", "median_ns"]
    assert sorted(short.select(key).rows()) == sorted(full.select(key).rows())  # row for row
    assert (short["kernel"].str.len_chars() < full["kernel"].str.len_chars() + 1).all()


def test_real_exports_that_nsys_short_names_would_merge():
    """The 2025.3 layernorm capture launches PyTorch's ``vectorized_elementwise_kernel`` with
    several template arguments: nsys's short name is one for all of them, ours keep them apart."""
    path = FIXTURES / "layernorm-3impl" / "layernorm-3impl-nsys2025.3.sqlite"
    short = view_table([path], "kernels", names="short")
    full = view_table([path], "kernels")
    assert full.height == short.height == 14
    by_short = short.filter(pl.col("kernel").str.starts_with("vectorized_elementwise_kernel"))
    assert by_short.height > 1 and by_short["kernel"].n_unique() == by_short.height
