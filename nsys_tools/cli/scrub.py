"""scrub: identity out of exports."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ..errors import BadExport, NsysToolsError, OutputError
from .app import _fail, app, emit, friendly, stderr


@app.command()
@friendly
def scrub(
    paths: Annotated[
        list[Path],
        typer.Argument(
            help="Exports (.sqlite) to scrub in place (the file behind a symlink), or folders: every .sqlite under them "
            "(hidden ones, such as caches, skipped)."
        ),
    ],
    check: Annotated[
        bool,
        typer.Option("--check", help="Write nothing: list what would be removed, and exit 1 if anything identifying is there."),
    ] = False,
) -> None:
    """Remove the profiled process's environment, user and host names, home and shared folders, command
    lines, credentials, network addresses, e-mail, host names, scheduler, Kubernetes and cloud ids from
    exports and their schema, and nothing the analysis reads (kernel, API and NVTX names stay; identity
    found in them is listed). --check runs the same detectors and names each kind it finds."""
    from ..files import shown
    from ..read.scrub import check as check_export
    from ..read.scrub import in_folder
    from ..read.scrub import scrub as scrub_export

    failures, unclean = [], []
    files: list[Path] = []
    skipped = 0
    for path in paths:
        if path.is_dir():
            found, outside = in_folder(path)
            for link in outside:  # a write never leaves the folder it was given
                stderr.print(f"Warning: {shown(link)}: skipped, a symlink (scrub the file it points to by name)", markup=False)
            skipped += len(outside)
        else:
            found = [path]
        if not found and not skipped:
            failures.append(BadExport(shown(path), "holds no .sqlite exports", "point at an export or a folder of them"))
        files += found
    for path in files:
        name = shown(path)
        try:
            result = check_export(path) if check else scrub_export(path)
        except OutputError:
            raise  # a full disk fails the next export too: one error, and the run ends
        except NsysToolsError as err:
            failures.append(err)
            continue
        detail = ", ".join(f"{n} {what}" for what, n in result.changed.items()) or "nothing to remove"
        stderr.print(f"{name}: {'would remove ' if check and result.total else ''}{detail}", markup=False)
        if check:
            emit("".join(f"{name}: {line}\n" for line in result.examples))
        for line in result.kept:
            stderr.print(f"Warning: {name}: left as it is, {line}", markup=False)
        for line in result.warnings:
            stderr.print(f"Warning: {name}: {line}", markup=False)
        if not result.clean:
            unclean.append(path)
    if skipped:
        stderr.print(f"{skipped} symlink(s) skipped", markup=False)
    if failures:
        verb = "checked" if check else "scrubbed"
        _fail(failures, f"{len(failures)} of {len(files)} exports could not be {verb}" if files else f"no export was {verb}")
    if check and unclean:
        stderr.print(f"Error: {len(unclean)} of {len(files)} exports hold identity; run nsys-tools scrub on them", markup=False)
        raise typer.Exit(1)
