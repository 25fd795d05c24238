"""Rendering: markdown, terminal, csv and json tables, charts, trace-event timelines and Parquet frames."""
