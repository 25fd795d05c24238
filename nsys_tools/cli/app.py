"""The typer app: the command group, ``--debug``/``--version``, the error policy, writing data and the entry point."""

from __future__ import annotations

import functools
import io
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated

import typer
import typer.core

from ..errors import BadExport, NsysToolsError, OutputError
from ..escape import terminal

HELP_OPTIONS = {"help_option_names": ["-h", "--help"]}


class _Commands(typer.core.TyperGroup):
    """The command group: ``--debug`` is accepted anywhere before a ``--``, not only before the
    command name (``nsys-tools report x.sqlite --debug``)."""

    def parse_args(self, ctx, args: list[str]) -> list[str]:
        end = args.index("--") if "--" in args else len(args)
        if "--debug" in args[:end]:
            args = ["--debug", *(a for i, a in enumerate(args) if a != "--debug" or i >= end)]
        return super().parse_args(ctx, args)


app = typer.Typer(
    name="nsys-tools",
    cls=_Commands,
    help="Nsight Systems exports into kernel-time tables, same-session comparisons and issue comments.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings=HELP_OPTIONS,
    rich_markup_mode=None,
)


class _Lines:
    """The console of ``Error:``, ``Warning:`` and ``Note:`` lines. Each text printed is made one
    safe terminal line (``escape.terminal``): a file name or a name from an export cannot send
    escape sequences to the terminal or start a line of its own. Rich's console (``console``,
    which progress bars draw on too) is made at the first line: a command that prints none does
    not import it."""

    def __init__(self) -> None:
        self._console = None

    @property
    def console(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, soft_wrap=True, highlight=False, emoji=False)  # a path may hold ":name:"
        return self._console

    def print(self, *objects, **kwargs) -> None:
        self.console.print(*(terminal(o) if isinstance(o, str) else o for o in objects), **kwargs)


stderr = _Lines()


_debug = {"on": False}


def friendly(fn):
    """Turn the toolkit's errors into one ``Error:`` line and exit code 1. Anything else that
    escapes is a bug: it gets one line too, saying so (``--debug`` shows the traceback)."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort, typer.TyperException):  # usage errors (exit 2) and exits
            raise
        except KeyboardInterrupt:
            stderr.print("Interrupted.", markup=False)
            raise typer.Exit(130) from None
        except Exception as err:
            from ..files import interrupted

            if interrupted():  # the interrupt, surfacing through a library as an error of its own
                stderr.print("Interrupted.", markup=False)
                raise typer.Exit(130) from None
            if _debug["on"]:
                raise
            if isinstance(err, NsysToolsError):
                stderr.print(f"Error: {err}", markup=False)
                raise typer.Exit(1) from None
            stderr.print(f"Error: {BUG} ({type(err).__name__}: {err}); run again with --debug and report it", markup=False)
            raise typer.Exit(1) from None

    return wrapper


BUG = "unexpected failure, a bug in nsys-tools"


def emit(text: str) -> None:
    """Data to stdout. A reader that went away (``| head``) ends the program quietly with exit
    0, as Unix tools do; a full device is an ``Error:``. Either way stdout is pointed at
    /dev/null, so the interpreter does not fail again flushing it at exit."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except OSError as exc:
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError, io.UnsupportedOperation):
            pass
        if isinstance(exc, BrokenPipeError):
            raise typer.Exit(0) from None
        raise OutputError(None, f"cannot write to standard output ({exc.strerror or exc})", "check where stdout goes") from exc


def _version(show: bool) -> None:
    if show:
        from .. import __version__

        emit(f"nsys-tools {__version__}\n")
        raise typer.Exit()


@app.callback()
def main(
    debug: Annotated[bool, typer.Option("--debug", help="Show tracebacks for errors.")] = False,
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    _debug["on"] = debug
    import warnings

    from ..read.export import StaleExport

    warnings.filterwarnings("ignore", category=StaleExport)  # the commands print it as a Note: line


def _output(output: Path | None, inputs=()) -> Path | None:
    """``--output``, checked before any work (``files.output_target``): the file to write."""
    if output is None:
        return None
    from ..files import output_target

    return output_target(output, inputs)


def _write(text: str | Iterable[str], output: Path | None) -> None:
    """Data (or its pieces, one after another) to ``output`` (written whole, then renamed into
    place) or to stdout."""
    if output is None:
        for piece in [text] if isinstance(text, str) else text:
            emit(piece)
        return
    from ..files import write_text_atomically

    write_text_atomically(output, text, through_link=True)
    stderr.print(f"Wrote {output}", markup=False)


def _write_parquet(frame, output: Path) -> None:
    from ..files import replaced_atomically

    with replaced_atomically(output, through_link=True) as partial:
        frame.write_parquet(partial)
    stderr.print(f"Wrote {output}", markup=False)


def _skipped(skipped: list, strict: bool) -> None:
    """One rule for bad entries found in folders and globs: one warning line each and a count,
    or, with ``--strict``, the first is the error."""
    if not skipped:
        return
    from ..files import shown

    if strict:
        path, why = skipped[0]
        raise BadExport(
            shown(path),
            f"is {why}" if not why.startswith(("is ", "has ", "holds ")) else why,
            "--strict: remove it, or drop --strict to skip it",
        )
    for path, why in skipped:
        stderr.print(f"Warning: {shown(path)}: skipped ({why})", markup=False)
    stderr.print(
        f"Skipped {len(skipped)} bad entr{'y' if len(skipped) == 1 else 'ies'} (--strict makes them errors)", markup=False
    )


def _allow_plugins(plugins: list[str] | None, sweeps: list[Path]) -> None:
    """Load only the plugins the user names; one note per sweep naming others (never imported from it)."""
    from ..plugin.loader import allow

    allow(plugins or [])
    if not sweeps:
        return
    from ..study.folder import load

    for folder in {os.path.realpath(f): f for f in sweeps}.values():
        try:
            sweep = load(folder)
            note = sweep.plugin_note
        except NsysToolsError:
            continue  # the command itself reports a folder it cannot read
        if note:
            stderr.print(note, markup=False)
        for unit, status in sweep.not_captured.items():
            if status == "missing export":
                stderr.print(f"Warning: {sweep.id}: {unit}: its export {unit}.sqlite is missing; left out", markup=False)
        for unit, why in sweep.skipped.items():
            stderr.print(f"Warning: {sweep.id}: {unit}: skipped, unread ({why})", markup=False)


def _fail(failures: list[NsysToolsError], summary: str) -> None:
    """List the exports that failed, one ``Error:`` line each, then exit 1."""
    for err in failures:
        stderr.print(f"Error: {err}", markup=False)
    stderr.print(f"Error: {summary}", markup=False)
    raise typer.Exit(1)


def _folder_files(folder: Path) -> list[Path]:
    """The files of a sweep folder (or a sweep archive itself), which an output must not replace."""
    return [folder] if folder.is_file() else [f for f in folder.iterdir() if f.is_file()]


def _read_by(exports: list[Path]) -> list[Path]:
    """The files reading ``exports`` touches (a report's .sqlite too), which an output must not replace."""
    from ..read.export import REPORT_SUFFIXES

    return [*exports, *(f.with_suffix(".sqlite") for f in exports if f.suffix in REPORT_SUFFIXES)]


def _capture_exports(path: Path, reexport: bool = False) -> list[Path]:
    """The exports a capture argument (an export, a folder of them, a sweep folder) reads."""
    from ..folder_format import is_sweep
    from ..read.inputs import expand_inputs

    if not path.exists():
        return []
    return [] if is_sweep(path) else expand_inputs([path], reexport=reexport)


def _stale_notes(files: list[Path]) -> None:
    """One ``Note:`` on stderr for each ``.sqlite`` read as given although a newer report sits beside it."""
    from ..read.export import stale_note

    for f in files:
        note = stale_note(f)
        if note:
            stderr.print(f"Note: {note}", markup=False)


def safe_path() -> None:
    """Take the working directory off ``sys.path`` (``python -m`` puts it first; an empty entry
    in PYTHONPATH does too), so that a ``kernels/`` or plugin module in whatever folder the
    command runs from is never imported in place of the installed one. A source checkout run
    from its own root keeps it: that folder is where this package came from."""
    home = Path(__file__).resolve().parents[2]
    cwd = os.path.realpath(os.getcwd())
    if cwd == str(home):
        return
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != cwd]


def return_freed_pages() -> None:
    """Polars' allocator (jemalloc) keeps freed pages resident for 0.5 s, then 1 s more as lazily
    freed pages, which still count as resident. Reading a large export a piece a second, that is
    the last pieces' memory on top of this one's: a third of the peak. Returned after 0.1 s, it
    is not. The setting is read when Polars is imported (it appends it to its own), so the command
    sets it as the process starts, before Polars, and never over a setting of the user's."""
    if "polars" not in sys.modules:
        os.environ.setdefault("_RJEM_MALLOC_CONF", "dirty_decay_ms:100,muzzy_decay_ms:0")


def run() -> None:
    """Console-script entry point (and ``python -m nsys_tools``: the same program name, so its
    help and shell completion read ``nsys-tools``)."""
    import tempfile

    from ..files import reap_stale, stop_on_interrupt

    return_freed_pages()
    safe_path()
    reap_stale(tempfile.gettempdir())  # spill folders of runs that were killed
    stop_on_interrupt()
    commands, groups = app.registered_commands, app.registered_groups
    named = _named(sys.argv[1:])
    if named is not None:  # typer builds every command it holds, signatures and all: only the one asked for
        app.registered_commands = [c for c in commands if _name(c) == named]
        app.registered_groups = [g for g in groups if g.name == named]
    try:
        app(prog_name="nsys-tools")
    finally:
        app.registered_commands, app.registered_groups = commands, groups


def _name(command) -> str:
    from typer.main import get_command_name

    return command.name or get_command_name(command.callback.__name__)


def _named(args: list[str]) -> str | None:
    """The command that ``args`` name (the first word that is not ``--debug``), where it is one of
    the app's; None for anything else (help, ``--version``, a misspelled name that typer then
    answers with the names it knows, shell completion)."""
    if any(key.endswith("_COMPLETE") for key in os.environ):
        return None
    first = next((a for a in args if a != "--debug"), None)
    known = {_name(c) for c in app.registered_commands} | {g.name for g in app.registered_groups}
    return first if first in known else None
