"""The ``nsys-tools`` command line: a thin layer over the library.

This package is the only one that imports typer and rich. Data goes to stdout; messages and
progress go to stderr. Errors the user can fix print one ``Error:`` line and exit 1
(``--debug`` shows the traceback); usage errors exit 2. ``app`` holds the typer app; each
command group is a module, registered on import, in the order ``--help`` lists them.
"""

from . import report, diagnose, capture, compare, scrub, ledger, census, bench, see  # noqa: F401, I001  (registration order)
from .app import BUG, app, run

__all__ = ["BUG", "app", "run"]
