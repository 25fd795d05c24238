"""Writing files so that a reader never sees half of one, and nothing already there is lost.
Standard library only (the capture side uses it too)."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import OutputError

_HINTS = {
    errno.ENOSPC: "free some space on that device, or {elsewhere}",
    errno.EDQUOT: "free some space on that device, or {elsewhere}",
    errno.EFBIG: "the file would pass a size limit of this system or its file system; {elsewhere}",
    errno.EIO: "the device may be full or failing, or the file past a size limit of this system; {elsewhere}",
    errno.EROFS: "that file system is read-only; {elsewhere}",
    errno.EACCES: "you may not write there; {elsewhere}",
    errno.EPERM: "you may not write there; {elsewhere}",
    errno.ENOENT: "check that the folder exists",
    errno.ENOTDIR: "a part of the path is a file, not a folder",
}
_SQLITE_WRITES = {"SQLITE_FULL": errno.ENOSPC, "SQLITE_IOERR_WRITE": errno.EIO}  # SQLite keeps no errno
_OS_ERROR = re.compile(r"\(os error (\d+)\)|\[errno (\d+)\]", re.IGNORECASE)  # Rust's and Arrow's words for one
_LOST_ERROR = "transport error"  # Polars' Parquet footer that could not be written, its errno lost


def _failed_write(exc: BaseException) -> tuple[int, str] | None:
    """The ``errno`` of a write that failed and its words, also when a native library (Polars,
    Arrow, SQLite) raised it as an error of its own; None for an error that is not a failed write."""
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno, os.strerror(exc.errno)
    name = getattr(exc, "sqlite_errorname", None)
    if name is not None:
        return (_SQLITE_WRITES[name], str(exc)) if name in _SQLITE_WRITES else None
    text = str(exc)
    found = _OS_ERROR.search(text)  # also an OSError of Polars', its errno only in its words
    if found:
        code = int(found.group(1) or found.group(2))
        return code, os.strerror(code)
    if isinstance(exc, OSError):
        return 0, text
    return (errno.EIO, "the write failed part way") if _LOST_ERROR in text else None


def output_error(path: str | Path | None, exc: BaseException, elsewhere: str = "write elsewhere") -> OutputError:
    """An error met while writing ``path`` (an ``OSError``, or a native library's failed write),
    as the one line the CLI prints; ``elsewhere`` says how to write it somewhere else."""
    code, reason = _failed_write(exc) or (0, str(exc))
    return OutputError(path, f"cannot be written ({reason})", _HINTS.get(code, "{elsewhere}").format(elsewhere=elsewhere))


@contextmanager
def writing(path: str | Path, elsewhere: str = "write elsewhere") -> Iterator[None]:
    """Run a block that writes ``path``: a failed write (an ``OSError``, or a native library's
    error carrying one) comes out as one ``OutputError`` naming it."""
    try:
        yield
    except OutputError:
        raise
    except Exception as exc:
        if _failed_write(exc) is None:
            raise
        raise output_error(path, exc, elsewhere) from exc


# -- what a run leaves behind, and how it goes however the run ends --------------------------

_LIVE: set[str] = set()  # temporary files and folders of this process, removed if it is stopped
PID_NAMED = re.compile(r"^(?:nsys-tools-spill-(\d+)-.+|\..+\.(\d+)\.[0-9a-f]+\.partial(?:\.[^.]+)?)$")


def track(path: str | Path) -> None:
    """Remove ``path`` (a file or folder) if this process is interrupted or exits before ``untrack``."""
    _LIVE.add(str(path))


def untrack(path: str | Path) -> None:
    _LIVE.discard(str(path))


def remove_tracked() -> None:
    """Remove every tracked temporary file and folder (at exit, or on an interrupt)."""
    import shutil

    for path in list(_LIVE):
        try:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass
        _LIVE.discard(path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, another user's
        return True
    return True


def reap_stale(folder: str | Path) -> list[Path]:
    """Remove what runs that were killed (their owner pid is gone) left in ``folder``: spill
    folders (``nsys-tools-spill-<pid>-*``) and hidden partial writes (``.<name>.<pid>.partial*``).
    Returns what was removed."""
    import shutil

    gone = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return gone
    for entry in entries:
        m = PID_NAMED.match(entry.name)
        if not m or _alive(int(m.group(1) or m.group(2))) or int(m.group(1) or m.group(2)) == os.getpid():
            continue
        try:
            if entry.is_dir(follow_symlinks=False):
                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                os.unlink(entry.path)
            gone.append(Path(entry.path))
        except OSError:
            pass
    return gone


_SIGNALLED = {"on": False}  # a Ctrl-C or SIGTERM has arrived


def interrupted() -> bool:
    """Whether a Ctrl-C or SIGTERM has arrived. Its ``KeyboardInterrupt`` can surface as another
    error: raised inside a callback from a native library (a Polars dtype check), it is printed
    as ignored there and the library fails with an error of its own."""
    return _SIGNALLED["on"]


def stop_on_interrupt(grace_s: float = 0.8) -> None:
    """Ctrl-C (and SIGTERM) end the run within about a second, exit code 130, nothing left
    behind: the first signal raises ``KeyboardInterrupt`` where Python runs; if a long call in
    a native library holds the thread past ``grace_s``, the tracked temporary files are removed
    and the process exits from a timer thread. Exit also removes them (``atexit``)."""
    import atexit
    import signal
    import sys
    import threading

    atexit.register(remove_tracked)

    def hard_exit() -> None:
        remove_tracked()
        try:
            sys.stderr.write("Interrupted.\n")
            sys.stderr.flush()
        finally:
            os._exit(130)

    def handler(signum, frame) -> None:
        _SIGNALLED["on"] = True
        timer = threading.Timer(grace_s, hard_exit)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main thread
            pass


PARTIAL_TOKEN = 8  # random bytes in a partial write's name: nobody can plant a link under it


def _new_partial(target: Path, mode: int) -> tuple[Path, int]:
    """A new hidden file beside ``target``, made here and now (``O_CREAT|O_EXCL|O_NOFOLLOW``) under
    a name nobody can guess, and its descriptor: a link planted in the folder is never opened."""
    import secrets

    stem = target.stem[:100]  # a file name has at most 255 bytes
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    while True:
        partial = target.with_name(f".{stem}.{os.getpid()}.{secrets.token_hex(PARTIAL_TOKEN)}.partial{target.suffix}")
        try:
            return partial, os.open(partial, flags, mode)
        except FileExistsError:  # drawn twice: draw again
            continue


@contextmanager
def replaced_atomically(path: Path, *, through_link: bool = False, mode: int = 0o666) -> Iterator[Path]:
    """A new hidden file beside ``path`` to write (``_new_partial``; same suffix, so writers that
    go by it still can). It is renamed over ``path`` when the block ends, with the permissions of
    the regular file it replaces, and removed if the block raises, so ``path`` is either what it
    was or complete. A symlink at ``path`` is replaced by the file, never followed; only an output
    the user named (``through_link``) is written through a link, to the file behind it. A failed
    write (``writing``) comes out as ``OutputError``."""
    path = Path(path)
    if through_link:
        target = Path(os.path.realpath(path))
    else:
        target = Path(os.path.realpath(path.parent)) / path.name
    for stale in target.parent.glob(f".{glob_escape(target.stem[:100])}.*.partial{glob_escape(target.suffix)}"):
        reap_one(stale)  # a killed run's partial write of this same file
    with writing(path):
        partial, fd = _new_partial(target, mode)
        os.close(fd)
    track(partial)
    try:
        with writing(path):
            yield partial
            now = os.lstat(partial)
            if not stat.S_ISREG(now.st_mode) or now.st_nlink != 1:  # a link put in its place while it was written
                raise OutputError(path, "was swapped by another process while being written", "write into your own folder")
            try:
                old = os.lstat(target)
            except FileNotFoundError:
                old = None
            if old is not None and stat.S_ISREG(old.st_mode):
                os.chmod(partial, stat.S_IMODE(old.st_mode))
            os.replace(partial, target)
    finally:
        try:
            partial.unlink(missing_ok=True)
        except OSError:
            pass
        untrack(partial)


@contextmanager
def made_folder(folder: Path) -> Iterator[Path]:
    """``folder``, made with its parents, for a block that fills it; the folders made here are
    removed again (those still empty) if the block raises."""
    made, here = [], Path(os.path.abspath(folder))
    while not os.path.lexists(here):
        made.append(here)
        here = here.parent
    with writing(folder):
        folder.mkdir(parents=True, exist_ok=True)
    try:
        yield folder
    except BaseException:
        for empty in made:  # deepest first
            try:
                empty.rmdir()
            except OSError:
                break
        raise


def glob_escape(text: str) -> str:
    import glob

    return glob.escape(text)


def reap_one(path: Path) -> None:
    """Remove ``path``, a pid-named partial write, if the process that made it is gone."""
    m = PID_NAMED.match(path.name)
    if m and not _alive(int(m.group(1) or m.group(2))):
        try:
            path.unlink()
        except OSError:
            pass


def write_text_atomically(path: Path, text: str | Iterable[str], *, through_link: bool = False) -> None:
    """Write ``text`` (or its pieces, one after another) to ``path`` through ``replaced_atomically``."""
    with replaced_atomically(path, through_link=through_link) as partial, open(partial, "w") as sink:
        sink.writelines([text] if isinstance(text, str) else text)


def shown(path: str | Path) -> str:
    """A path as output names it: relative to the working directory when inside it, else
    ``~/...`` when inside the home folder, so that a home folder (``/home/first.last``) never
    lands in a comment or a log that gets shared; other paths as they are."""
    full = Path(os.path.abspath(path))
    for base, prefix in ((Path.cwd(), ""), (Path.home(), "~/")):
        try:
            rel = full.relative_to(base)
        except ValueError:
            continue
        return prefix + str(rel) if str(rel) != "." else (prefix.rstrip("/") or ".")
    return str(full)


def same_file(a: Path, b: Path) -> bool:
    """Whether two paths name one file (through symlinks and hard links)."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


EXPORT_SIBLINGS = (".sqlite", ".nsys-rep", ".qdrep")  # one capture: a report and its export


def siblings(path: Path) -> list[Path]:
    """``path`` and the other files of its capture: ``x.sqlite`` <-> ``x.nsys-rep``/``x.qdrep``."""
    path = Path(path)
    if path.suffix.lower() not in EXPORT_SIBLINGS:
        return [path]
    return [path, *(path.with_suffix(s) for s in EXPORT_SIBLINGS if s != path.suffix.lower())]


def output_target(path: Path, inputs: Iterable[Path] = ()) -> Path:
    """Check ``--output path`` before any work: not empty, not a folder, device or read-only
    file, and not one of ``inputs`` nor an input's report or export sibling (``a.sqlite`` ->
    ``a.nsys-rep``), existing or not; its folder is made. Returns the path to write (a
    symlink's target is written through, the link kept)."""
    if str(path) in ("", "."):
        raise OutputError(None, "the output path is empty", "give a file name to --output")
    target = Path(os.path.realpath(path))
    for source in inputs:
        for kin in siblings(Path(source)):
            if os.path.realpath(kin) == str(target) or same_file(target, kin) and target.exists():
                what = "an input of this command" if kin == Path(source) else f"the capture file beside an input ({source})"
                raise OutputError(path, f"is {what}", "choose another output file")
    try:
        st = target.stat()
    except FileNotFoundError:
        st = None
    except OSError as exc:
        raise output_error(path, exc) from exc
    if st is not None:
        if stat.S_ISDIR(st.st_mode):
            raise OutputError(path, "is a folder", "give a file name for --output")
        if not stat.S_ISREG(st.st_mode):
            raise OutputError(path, "is a device or other special file", "--output writes regular files; redirect stdout instead")
        if not st.st_mode & 0o222:
            raise OutputError(path, "is read-only", "choose another file, or make it writable first")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise output_error(target.parent, exc) from exc
    if not target.parent.is_dir():
        raise OutputError(path, "its folder is not a folder", "check the path")
    return target


_SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]{0,63}")
_UNSAFE_CHAR = re.compile(r"[^A-Za-z0-9._+=-]")


def safe_name(text: str) -> str:
    """``text`` (a sweep id, a shape name: text from a file) as one file name that stays in its
    folder: kept as it is when it is already one (safe characters only, up to 64, not starting
    with a dot); otherwise its safe characters (others as ``_``, the first 40) and a hash of the
    whole text, so that ``/``, ``..``, an absolute path or 5,000 characters never become path
    parts, and different texts keep different names."""
    import hashlib

    if _SAFE_NAME.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    kept = _UNSAFE_CHAR.sub("_", text)[:40].lstrip(".")
    return f"{kept}-{digest}" if kept else digest


def output_folder(folder: Path, inputs: Iterable[Path] = ()) -> Path:
    """Check ``--to folder`` before any work: not a file, and not the folder of an input (nor
    ``.`` there), so that no file written into it can land on an input or its capture files."""
    if os.path.lexists(folder) and not os.path.isdir(folder):
        raise OutputError(folder, "is a file", "give a folder to --to")
    real = os.path.realpath(folder)
    for source in inputs:
        homes = {os.path.realpath(Path(source).parent), os.path.dirname(os.path.realpath(source)), os.path.realpath(source)}
        if real in homes:
            raise OutputError(folder, f"is the folder of the input {Path(source).name}", "give --to a folder of its own")
    return folder
