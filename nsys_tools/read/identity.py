"""Identity by kind: what a text holds that names a person, a machine, a network or a secret,
whoever the user is and whatever the environment says.

Each ``Kind`` is one pattern and what replaces the part it finds: a secret becomes
``[scrubbed]``; anything else a pseudonym (``<ip-1>``, ``<email-2>``) that is the same for the same
value everywhere in one file, so rows that named the same machine still name the same one.
``replace`` is what ``scrub`` writes and ``found`` what ``scrub --check`` and the report of
analysis strings use: the same patterns, so a text ``found`` passes holds nothing ``replace``
would take. No pseudonym or placeholder matches any pattern, so scrubbing twice changes nothing.
Standard library only: scrub runs on the GPU machine.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

PLACEHOLDER = "[scrubbed]"


@dataclass(frozen=True)
class Kind:
    label: str  # what the report calls it
    pattern: re.Pattern
    tag: str = ""  # pseudonym prefix; empty: a secret, replaced by PLACEHOLDER
    keep: Callable[[str], bool] = lambda _: False  # values that are not identity
    hint: tuple[str, ...] = ()  # lowercase pieces of which any text the pattern matches holds one


_NOT_VALUE = r"(?!\[scrubbed\]|<[a-z0-9]+(?:-\d+)?>)"  # already replaced
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_H = r"[0-9A-Fa-f]{1,4}"
_IPV6 = (
    rf"(?:{_H}:){{7}}{_H}"
    rf"|(?:{_H}:){{1,7}}:(?:{_H}(?::{_H}){{0,5}})?"
    rf"|::(?:{_H}:){{0,6}}{_H}"
)
# Top-level domains a site's machines are named under: public ones with three labels or more
# (two, such as ``example.com``, name a site, not a machine), private ones with any.
_PUBLIC_TLD = "com|net|org|edu|gov|mil|io|ai|us|uk|de|fr|jp|cn|ru|ch|nl|se|fi|au|ca|kr|tw|eu|cloud|info|biz"
_PRIVATE_TLD = "internal|local|localdomain|lan|corp|cluster|intranet|intra|example|test|invalid|home"
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
# Public sites that name no one: documentation and package links nsys and Python print.
PUBLIC_DOMAINS = ("nvidia.com", "github.com", "githubusercontent.com", "pytorch.org", "python.org", "pypi.org")
_K8S = "[bcdfghjklmnpqrstvwxz2456789]"  # the alphabet Kubernetes draws pod-name suffixes from
_CREDENTIAL_WORD = (
    r"(?:password|passwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key(?:[_-]?id)?|secret[_-]?key"
    r"|private[_-]?key|session[_-]?token|auth[_-]?token|client[_-]?secret|credentials?)"
)


def _public(value: str) -> bool:
    value = value.lower().rstrip(".")
    return any(value == d or value.endswith("." + d) for d in PUBLIC_DOMAINS)


def _k(label: str, pattern: str, tag: str = "", keep: Callable[[str], bool] = lambda _: False, hint: str = "") -> Kind:
    return Kind(label, re.compile(pattern), tag, keep=keep, hint=tuple(hint.split()))


KINDS: tuple[Kind, ...] = (
    _k(
        "private keys", r"(?P<v>-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$))", hint="private"
    ),
    _k("credentials in URLs", r"\b[A-Za-z][A-Za-z0-9+.-]*://(?P<v>(?!\[scrubbed\])[^/\s:@]+:[^/\s@]*)@", hint="://"),
    _k("JWTs", r"(?P<v>\beyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*)", hint="eyj"),
    _k("bearer tokens", rf"(?i)\b(?:Bearer|Basic)\s+{_NOT_VALUE}(?P<v>[A-Za-z0-9._~+/-]{{8,}}=*)", hint="bearer basic"),
    _k(
        "keys with known prefixes",
        r"(?P<v>\b(?:AKIA|ASIA)[0-9A-Z]{16}\b|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_\w{20,}|\bxox[abprse]-[\w-]{10,}"
        r"|\bhf_[A-Za-z0-9]{20,}|\bglpat-[\w-]{20,}|\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}"
        r"|\bAIza[0-9A-Za-z_-]{35}|\bnpm_[A-Za-z0-9]{36}|\bpypi-[A-Za-z0-9_-]{40,}|\bSG\.[\w-]{16,}\.[\w-]{16,})",
        hint="akia asia gh github_pat_ xox hf_ glpat- sk- aiza npm_ pypi- sg.",
    ),
    _k(
        "Azure SAS signatures",
        rf"(?i)(?:^|[?&;\s])(?:sig|AccountKey|SharedAccessKey)={_NOT_VALUE}(?P<v>[^&\s\"';]+)",
        hint="sig= accountkey= sharedaccesskey=",
    ),
    _k(
        "credentials after credential words",
        rf"(?i)(?<![A-Za-z0-9])(?:[a-z0-9]+[_-])*{_CREDENTIAL_WORD}[\"']?\s*[:=]\s*[\"']?{_NOT_VALUE}"
        r"(?P<v>(?=[^\s\"',;&}]*\d)(?=[^\s\"',;&}]*[A-Za-z])[^\s\"',;&}]{6,}|[^\s\"',;&}]{12,})",
        hint="pass secret token key credential",
    ),
    _k(
        "scheduler job and node variables",
        rf"(?<![A-Za-z0-9])(?i:SLURMD?|PBS|LSB|LSF|SGE|COBALT|FLUX)_[A-Za-z0-9_]+[\"']?\s*[:=]\s*[\"']?{_NOT_VALUE}"
        r"""(?P<v>[^\s"',;&]+)""",
        hint="slurm pbs_ lsb_ lsf_ sge_ cobalt_ flux_",
    ),
    _k(
        "Kubernetes pod and namespace names",
        r"(?<![A-Za-z0-9])(?i:KUBERNETES_[A-Z0-9_]+|K8S_[A-Z0-9_]+|(?:MY_)?POD_(?:NAME|NAMESPACE|IP)|pod|namespace"
        rf"|pod[_ ]name|kube[_-]?namespace)[\"']?\s*[:=/]\s*[\"']?{_NOT_VALUE}(?P<v>[A-Za-z0-9][\w.-]*)"
        rf"|(?<![\w.-])(?P<pod>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?-{_K8S}{{6,10}}-{_K8S}{{5}})(?![\w-])",
        "pod",
        hint="kube k8s pod namespace -",
    ),
    _k(
        "cloud instance ids",
        r"(?<![\w-])(?P<v>i-(?:[0-9a-f]{17}|[0-9a-f]{8})|ip-\d{1,3}-\d{1,3}-\d{1,3}-\d{1,3})(?![\w-])"
        r"|(?P<gcp>projects/[^/\s\"']+/zones/[^/\s\"']+/instances/[^/\s\"']+)"
        r"|(?P<azure>/subscriptions/[0-9A-Fa-f-]{36}(?:/[^\s\"']*)?)"
        rf"|\b(?i:instance[_-]?(?:id|name)|vm[_-]?(?:id|name)|resource[_-]?id)[\"']?\s*[:=]\s*[\"']?{_NOT_VALUE}(?P<label>[\w./-]+)",
        "instance",
        hint="i- ip- projects/ subscriptions/ instance vm resource",
    ),
    _k("e-mail addresses", r"(?P<v>[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,})", "email", hint="@"),
    _k(
        "MAC addresses",
        r"(?<![\w:-])(?P<v>[0-9A-Fa-f]{2}([:-])[0-9A-Fa-f]{2}(?:\2[0-9A-Fa-f]{2}){4})(?![\w:-])",
        "mac",
        keep=lambda v: set(v) <= set("0:-"),
        hint=": -",
    ),
    _k(
        "IPv4 addresses",
        rf"(?<![A-Za-z0-9.])(?P<v>(?:{_OCTET}\.){{3}}{_OCTET})(?![A-Za-z0-9]|\.\d)",
        "ip",
        keep=lambda v: v in ("0.0.0.0", "127.0.0.1", "255.255.255.255"),
        hint=".",
    ),
    _k(
        "IPv6 addresses",
        rf"(?<![\w:.])(?P<v>{_IPV6})(?![\w:])",
        "ipv6",
        keep=lambda v: not re.search(r"\d", v) or v in ("::1", "::"),
        hint=":",
    ),
    _k(
        "fully qualified host names",
        rf"(?i)(?<![\w.-])(?P<v>(?:{_LABEL}\.){{2,}}(?:{_PUBLIC_TLD})|(?:{_LABEL}\.)+(?:{_PRIVATE_TLD}))(?![\w-]|\.\w)",
        "fqdn",
        keep=_public,
        hint=".",
    ),
)


class Pseudonyms:
    """One file's pseudonyms: the same value gets the same one, in the order first met."""

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], str] = {}
        self._count: dict[str, int] = {}

    def of(self, tag: str, value: str) -> str:
        if not tag:
            return PLACEHOLDER
        key = (tag, value.lower())
        if key not in self._seen:
            self._count[tag] = self._count.get(tag, 0) + 1
            self._seen[key] = f"<{tag}-{self._count[tag]}>"
        return self._seen[key]


def _span(m: re.Match) -> tuple[int, int, str] | None:
    """The part of a match that is replaced: its first named group that matched."""
    for name, value in m.groupdict().items():
        if value is not None:
            return m.start(name), m.end(name), value
    return None


def _sub(kind: Kind, text: str, replace: Callable[[str], str], low: str) -> tuple[str, bool]:
    """``text`` with ``kind``'s finds replaced; ``low``, its lowercase, rules out most texts at
    once: a text that holds none of the kind's hints cannot match."""
    if kind.hint and not any(h in low for h in kind.hint):
        return text, False
    out, last, hit = [], 0, False
    for m in kind.pattern.finditer(text):
        span = _span(m)
        if span is None or kind.keep(span[2]):
            continue
        start, end, value = span
        out += [text[last:start], replace(value)]
        last, hit = end, True
    return ("".join(out) + text[last:], True) if hit else (text, False)


def replace(text: str, names: Pseudonyms) -> tuple[str, list[str]]:
    """``text`` with every kind's finds replaced, and the kinds found (in ``KINDS``' order)."""
    kinds, low = [], text.lower()
    for kind in KINDS:
        text, hit = _sub(kind, text, lambda v, kind=kind: names.of(kind.tag, v), low)
        if hit:
            kinds.append(kind.label)
            low = text.lower()
    return text, kinds


def found(text: str) -> list[str]:
    """The kinds ``text`` holds; nothing is changed."""
    return replace(text, Pseudonyms())[1]


def hide_secrets(text: str) -> str:
    """``text`` as it may be printed: every secret kind's find shown as ``…``."""
    for kind in KINDS:
        if not kind.tag:
            text = _sub(kind, text, lambda _: "…", text.lower())[0]
    return text
