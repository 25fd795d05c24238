"""The reference pages of the site, made from the registries when the site is built.

``mkdocs.yml`` names this file as a hook: ``on_files`` adds one page per command (from the
click command that typer builds from ``nsys_tools.cli.app``: usage, help, every option), one
per view (from ``nsys_tools.views.REGISTRY``: summary, description, columns, options, how it is
read) and one per diagnose rule (from ``nsys_tools.rules.REGISTRY``), with an index of each.
Nothing here is written into ``docs/``: the pages exist only in the built site, so they cannot
drift from the code. ``pages()`` gives them as text, for tests.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _cli():
    import typer

    from nsys_tools.cli import app

    return typer.main.get_command(app)


def _context(command, name: str, parent=None):
    return command.context_class(command, info_name=name, parent=parent)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _commands(group, prefix: str, parent) -> list[tuple[str, object, object]]:
    """(full name, command, context) of every command under ``group``, groups' members after them."""
    out = []
    for name, command in group.commands.items():
        ctx = _context(command, name, parent)
        out.append((f"{prefix} {name}", command, ctx))
        if hasattr(command, "commands"):
            out.extend(_commands(command, f"{prefix} {name}", ctx))
    return out


def _command_page(full: str, command, ctx) -> str:
    lines = [f"# `{full}`", "", "```text", command.get_usage(ctx), "```", ""]
    lines += [inspect.cleandoc(command.help or ""), ""]
    if hasattr(command, "commands"):
        lines += ["| command | what it does |", "|---|---|"]
        for name, sub in command.commands.items():
            lines.append(f"| [`{full} {name}`]({_slug(f'{full} {name}')}.md) | {_cell(sub.get_short_help_str(120))} |")
        return "\n".join(lines) + "\n"
    records = [p.get_help_record(ctx) for p in command.get_params(ctx)]
    lines += ["| argument or option | meaning |", "|---|---|"]
    lines += [f"| `{_cell(flags)}` | {_cell(meaning)} |" for flags, meaning in filter(None, records)]
    return "\n".join(lines) + "\n"


def _slug(full: str) -> str:
    return full.removeprefix("nsys-tools ").replace(" ", "-")


def _view_page(view) -> str:
    module = view.load()
    how = "in pieces (any part merges)" if view.splittable else "in time order (ordered)" if view.ordered else "whole"
    lines = [
        f"# View `{view.name}`",
        "",
        f"{view.summary[:1].upper()}{view.summary[1:]}.",
        "",
        "```text",
        f"nsys-tools report EXPORT --view {view.name}",
        "```",
    ]
    if view.rows:
        lines += ["", f"**One row per:** {view.rows}."]
    lines += ["", f"**nsys twin:** {f'`{view.twin}`' if view.twin else '(none)'}."]
    lines += ["", inspect.cleandoc(module.__doc__ or "").replace("``", "`"), ""]
    lines += [
        "## Columns",
        "",
        "After the `--by` keys (`gpu_id, gpu_name`, `pid, process_name`, `stream_id`) and `file` with `--per-file`:",
        "",
    ]
    lines += [", ".join(f"`{c}`" for c in view.columns), ""]
    lines += ["## Options", ""]
    if view.options:  # its Options dataclass, as the registry reads it (views/contract.py)
        lines += ["| flag | Python | type | default | what it does |", "|---|---|---|---|---|"]
        for o in view.options:
            lines.append(f"| `{o.flag}` | `{o.name}` | `{_cell(o.type)}` | `{_cell(repr(o.default))}` | {_cell(o.help)} |")
    else:
        lines.append("None beyond the options every view takes (`--by`, `--per-file`, the window, `--top`).")
    chart = f"`--chart` draws it (`{view.module}.chart`)." if not view.no_chart else f"No chart: {view.no_chart}"
    lines += ["", "## Chart", "", chart, "", "## How it is read", "", f"An export of any size is read {how}.", ""]
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Every generated page: its path under the site's root, and its markdown."""
    if str(ROOT) not in sys.path:  # document the checkout being built, installed or not
        sys.path.insert(0, str(ROOT))
    from nsys_tools import views

    root = _cli()
    out = {}
    top = _context(root, "nsys-tools")
    listed = ["# Commands", "", "Every page here is made from the command line's own definitions when the site is built.", ""]
    listed += ["| command | what it does |", "|---|---|"]
    for full, command, ctx in _commands(root, "nsys-tools", top):
        out[f"commands/{_slug(full)}.md"] = _command_page(full, command, ctx)
        listed.append(f"| [`{full}`]({_slug(full)}.md) | {_cell(command.get_short_help_str(120))} |")
    out["commands/index.md"] = "\n".join(listed) + "\n"
    listed = [
        "# Views",
        "",
        "`nsys-tools report --view NAME` and `nsys_tools.open(path).view(NAME)`; every page here is made",
        "from the view registry when the site is built.",
        "",
    ]
    listed += ["| view | what it gives |", "|---|---|"]
    for name in views.names():
        view = views.spec(name)
        out[f"views/{name}.md"] = _view_page(view)
        listed.append(f"| [`{name}`]({name}.md) | {_cell(view.summary)} |")
    out["views/index.md"] = "\n".join(listed) + "\n"
    out.update(_rule_pages())
    return out


def _rule_pages() -> dict[str, str]:
    """A page per diagnose rule (``nsys_tools.rules.REGISTRY``: summary, description, options), and their index."""
    from nsys_tools import rules

    out = {}
    listed = ["# Rules", "", "`nsys-tools diagnose` runs them all; every page here is made from the rule registry.", ""]
    listed += ["| rule | what it finds | nsys analyze twin |", "|---|---|---|"]
    for name in rules.names():
        rule = rules.spec(name)
        twin = f"`{rule.twin}`" if rule.twin else "(none)"
        lines = [f"# Rule `{name}`", "", f"{rule.summary[:1].upper()}{rule.summary[1:]}.", "", "```text"]
        lines += [f"nsys-tools diagnose EXPORT --rule {name} --format csv", "```", "", f"**nsys analyze twin:** {twin}.", ""]
        lines += [inspect.cleandoc(rule.load().__doc__ or "").replace("``", "`"), "", "## Options", ""]
        if rule.options:
            lines += ["| option | type | default | what it does |", "|---|---|---|---|"]
            lines += [f"| `{k}` | `{t.__name__}` | `{d!r}` | {_cell(h)} |" for k, (t, d, h) in rule.options.items()]
        else:
            lines.append("None.")
        out[f"rules/{name}.md"] = "\n".join(lines) + "\n"
        listed.append(f"| [`{name}`]({name}.md) | {_cell(rule.summary)} | {twin} |")
    out["rules/index.md"] = "\n".join(listed) + "\n"
    return out


def on_files(files, config):
    """The mkdocs hook: add the generated pages to the site's files."""
    from mkdocs.structure.files import File

    for path, text in pages().items():
        files.append(File.generated(config, path, content=text))
    return files
