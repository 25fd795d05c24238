"""Rules: what ``nsys-tools diagnose`` looks for in a run, each in its own module.

A rule module declares itself in one line, ``RULE = Rule("gpu_gaps", "GPU idle longer than a
threshold", twin="gpu_gaps")`` (literal arguments: the registry reads them from the source, so
listing rules imports none of them), and holds:

* ``OPTIONS``: ``{name: (type, default, help)}``, the options ``--rule NAME:option=value`` sets;
* ``rows(run, **options)``: its table (a Polars DataFrame), what ``--rule NAME --format csv``
  writes; a twin of an ``nsys analyze`` rule (``twin``) writes instead the rows of
  ``select(db, **options)`` (``db``: its export's ``analyze.Db``) under its ``COLUMNS``, the
  text nsys writes, and declares ``NEEDS``, the tables and columns nsys's query reads: where the
  export lacks one, nsys skips the rule, and the twin's csv is empty with a line naming it;
* ``findings(run, table, **options)``: the ``Finding``s its rows make (none when nothing is
  worth a look);
* optionally ``applies(run, **options)``: False where the rule cannot find anything in the run,
  known from counts that cost no read of the large tables (``copies`` without a megabyte of
  copies); ``diagnose`` then skips its rows.

``run`` is a ``Run``: the exports of one run (the ranks of one job) and what the rules share of
them, read once (the step table, the exports' spans). ``diagnose`` runs every rule and ranks the
findings by the time at stake, largest first.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Rule:
    """A rule as the registry knows it, before its module is imported."""

    name: str
    summary: str
    twin: str = ""  # the nsys analyze rule whose csv this one's equals, row for row
    module: str = ""

    def load(self) -> ModuleType:
        return import_module(self.module)

    @property
    def options(self) -> dict[str, tuple[type, Any, str]]:
        return dict(self.load().OPTIONS)


REGISTRY: dict[str, Rule] = {}


def declared(file: Path) -> Rule | None:
    """The ``RULE = Rule(...)`` a module declares at its top level, read without importing it."""
    for node in ast.parse(file.read_text(encoding="utf-8"), str(file)).body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        call = node.value
        if node.targets[0].id != "RULE" or not (isinstance(call, ast.Call) and getattr(call.func, "id", "") == "Rule"):
            continue
        try:
            return Rule(*(ast.literal_eval(a) for a in call.args), **{k.arg: ast.literal_eval(k.value) for k in call.keywords})
        except ValueError:
            raise ValueError(f"{file}: RULE = Rule(...) takes literal arguments only") from None
    return None


def discover(folder: Path, package: str) -> list[Rule]:
    """Register every module of ``folder`` (the package ``package``) that declares a rule."""
    found = []
    for file in sorted(folder.glob("*.py")):
        rule = declared(file)
        if rule is not None:
            if not rule.name.isidentifier():
                raise ValueError(f"{file}: rule name {rule.name!r} is not an identifier")
            REGISTRY[rule.name] = replace(rule, module=f"{package}.{file.stem}" if package else file.stem)
            found.append(REGISTRY[rule.name])
    return found


discover(Path(__file__).parent, __name__)


def spec(name: str) -> Rule:
    try:
        return REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown rule {name!r}: choose from {', '.join(sorted(REGISTRY))}") from None


def parse(text: str) -> tuple[Rule, dict[str, Any]]:
    """``NAME[:option=value]...`` as nsys analyze takes it: the rule and its options, each of
    the rule's type; options not given keep their defaults (``rows`` defaults to all rows)."""
    name, *given = text.split(":")
    rule = spec(name)
    known = rule.options
    options = {k: default for k, (_, default, _) in known.items()}
    for item in given:
        key, eq, value = item.partition("=")
        if key not in known:
            choices = ", ".join(known) or "none"
            raise ValueError(f"rule {name} has no option {key!r} (its options: {choices})")
        if not eq:
            raise ValueError(f"rule {name}: give {key}=VALUE")
        kind = known[key][0]
        try:
            options[key] = kind(value)
        except ValueError:
            raise ValueError(f"rule {name}: {key}={value!r} is not {'an integer' if kind is int else 'a number'}") from None
    return rule, options


@dataclass
class Finding:
    """One thing worth a look: the rule, a sentence with its numbers, the time at stake and its
    share of the run's span, where it happens, the rows behind it and what to try."""

    rule: str
    title: str
    time_ns: int
    share: float | None = None
    device: int | None = None
    rank: int | None = None
    steps: list[int] | None = None
    range: str | None = None
    kernel: str | None = None
    api: str | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    evidence: list[dict] = field(default_factory=list)
    advice: str = ""

    def as_json(self) -> dict:
        where = {k: getattr(self, k) for k in ("device", "rank", "steps", "range", "kernel", "api", "start_ns", "end_ns")}
        return {
            "rule": self.rule,
            "title": self.title,
            "time_ns": int(self.time_ns),
            "share": self.share,
            "where": where,
            "evidence": self.evidence,
            "advice": self.advice,
        }


def plural(n: int, word: str, many: str = "") -> str:
    """``n`` and ``word``, in the plural unless ``n`` is 1 (``many``: an irregular plural)."""
    return f"{n} {word if n == 1 else many or word + 's'}"


def names() -> tuple[str, ...]:
    return tuple(REGISTRY)


def run_rule(run, rule: Rule, options: dict[str, Any]) -> list[Finding]:
    """The findings of one rule on ``run``, each with its share of the run's span (none, and
    its rows unread, where it does not apply: ``applies``)."""
    module = rule.load()
    applies = getattr(module, "applies", None)
    if applies is not None and not applies(run, **options):
        return []
    found = module.findings(run, module.rows(run, **options), **options)
    span = run.span_ns
    for f in found:
        f.share = min(1.0, f.time_ns / span) if span else None
    return found


def diagnose(run, only: Iterable[str] = (), options: dict[str, dict] | None = None) -> list[Finding]:
    """Every rule's findings on ``run`` (or those of the rules named in ``only``), largest
    time at stake first."""
    chosen = [spec(n) for n in only] if only else list(REGISTRY.values())
    found = []
    for rule in chosen:
        given = (options or {}).get(rule.name, {})
        found += run_rule(run, rule, {**{k: d for k, (_, d, _) in rule.options.items()}, **given})
    return sorted(found, key=lambda f: (-f.time_ns, f.rule, f.title))


def as_json(found: Sequence[Finding]) -> str:
    import json

    return json.dumps({"findings": [f.as_json() for f in found]}, indent=2, default=str) + "\n"


def markdown(found: Sequence[Finding]) -> str:
    """The findings as a numbered markdown list: the title, the rule and share, the advice."""
    from ..render.tables import escape

    lines = []
    for i, f in enumerate(found, 1):
        share = "" if f.share is None else f", {100 * f.share:.1f}% of the run's span"
        lines.append(f"{i}. **{escape(f.title)}** ({f.time_ns / 1e6:,.3f} ms{share}; rule `{f.rule}`)  ")
        lines.append(f"   {escape(f.advice)}")
    return "\n".join(lines) + "\n"
