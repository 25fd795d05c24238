"""Text columns carried as integer codes: each distinct text held once, in memory.

The ordered views' rows go to disk and come back (``chunked.py``, ``spill.py``). Written as
text, an Arrow file holds each row's copy of its name, and so does the frame read back: a
kernel with a 20 MB name, launched 120 times, costs 2.4 GB there. ``Codes`` puts a number in
each text cell instead (``encode``) and keeps the texts beside, one copy each; ``decode`` puts
them back as Polars strings that all point at that one copy, so the sorts and joins that follow
move 16-byte views, not names.
"""

from __future__ import annotations

import polars as pl

CODE = pl.UInt32


class Codes:
    """The texts seen so far, numbered in order of arrival, and which columns hold codes."""

    def __init__(self):
        self.texts = pl.DataFrame(schema={"code": CODE, "text": pl.String})
        self.columns: list[str] = []

    def encode(self, df: pl.DataFrame) -> pl.DataFrame:
        """``df`` with each text column (string or category) as codes (``CODE``), any new text
        numbered; the columns must be the same from one call to the next."""
        text = [c for c, t in df.schema.items() if t == pl.String or isinstance(t, pl.Categorical)]
        self.columns = list(dict.fromkeys([*self.columns, *text]))
        if not text:
            return df
        df = df.with_columns(pl.col(text).cast(pl.String))
        seen = pl.concat([df.select(text=pl.col(c)) for c in text]).drop_nulls().unique()
        new = seen.join(self.texts, on="text", how="anti")
        self.texts = pl.concat([self.texts, new.select(code=pl.int_range(pl.len(), dtype=CODE) + self.texts.height, text="text")])
        return self._swap(df, text, "text", "code")

    def decode(self, df: pl.DataFrame) -> pl.DataFrame:
        """``df`` with its coded columns as text again (strings that share the one copy)."""
        return self._swap(df, [c for c in self.columns if c in df.columns], "code", "text")

    def _swap(self, df: pl.DataFrame, columns: list[str], old: str, new: str) -> pl.DataFrame:
        """Each of ``columns`` looked up in ``texts`` by ``old``, replaced by its ``new``, in place
        and in order (a join: a gather of the looked-up values, where a string costs its view)."""
        order = df.columns
        for c in columns:
            lookup = self.texts.select(pl.col(old).alias(c), pl.col(new).alias(f"{c}__{new}"))
            df = df.join(lookup, on=c, how="left", maintain_order="left").drop(c).rename({f"{c}__{new}": c})
        return df.select(order)
