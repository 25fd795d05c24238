"""The project's benchmark: whole commands timed in fresh processes, the working tree against a
base revision, side by side (``python -m benchmarks.compare``; README.md in this folder)."""
