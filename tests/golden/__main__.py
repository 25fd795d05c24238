"""``python -m tests.golden [--update] [NAME_GLOB]``: check the golden outputs, or write them again."""

from __future__ import annotations

import fnmatch
import sys
import time

from .cases import OUT, cases, run_case


def main(argv: list[str]) -> int:
    update = "--update" in argv
    patterns = [a for a in argv if not a.startswith("--")] or ["*"]
    selected = {n: a for n, a in cases().items() if any(fnmatch.fnmatch(n, p) for p in patterns)}
    OUT.mkdir(exist_ok=True)
    differ = []
    for name, argv_ in selected.items():
        t0 = time.perf_counter()
        text = run_case(argv_)
        path = OUT / f"{name}.txt"
        if update:
            path.write_text(text, encoding="utf-8")
        elif not path.exists() or path.read_text(encoding="utf-8") != text:
            differ.append(name)
        print(f"{name}: {time.perf_counter() - t0:.2f} s{' DIFFERS' if name in differ else ''}", file=sys.stderr)
    if update and patterns == ["*"]:
        for stale in set(p.stem for p in OUT.glob("*.txt")) - set(selected):
            (OUT / f"{stale}.txt").unlink()
    if differ:
        print(f"{len(differ)} of {len(selected)} outputs differ: {', '.join(differ)}", file=sys.stderr)
        return 1
    return 0


sys.exit(main(sys.argv[1:]))
