"""The command line as the tests run it: ``CliRunner().invoke(app, args)`` runs the click command
built from ``app`` once (``typer.main.get_command``), as a process running the CLI builds it once.
typer's own runner builds it again on every call, which evaluates every option's annotations
(about 0.1 s a call on 2 cores). A test that changes what the command is made of (a view added to
the registry) builds its own with ``typer.main.get_command``."""

from __future__ import annotations

from functools import cache

import click.testing
import typer
import typer.main


@cache
def command(app: typer.Typer) -> click.Command:
    return typer.main.get_command(app)


class CliRunner(click.testing.CliRunner):
    def invoke(self, app: typer.Typer, args=None, **kwargs) -> click.testing.Result:
        return super().invoke(command(app), args, **kwargs)
