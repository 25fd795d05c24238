"""The scripts behind ``reports/probes`` (each docstring has its command), run from a checkout and
not installed. They sit on top of the layers, beside the command line: they may import any layer,
and nothing imports them (pyproject's import contracts)."""
