"""Golden outputs: every command on every bundled export and committed sweep, normalized and stored as text.

``python -m tests.golden`` checks them; ``python -m tests.golden --update`` writes them again (a change that
alters an output on purpose regenerates them in the same commit). ``tests/test_golden.py`` runs the check.
"""
