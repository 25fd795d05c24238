"""Run a command, print its wall time, peak RSS and output size; kill it past a memory cap.

    python3 peak_rss.py CAP_MB OUT_FILE -- COMMAND...

stdout goes to OUT_FILE. The peak RSS is the kernel's (wait4); while the command runs, its RSS
is read from /proc ten times a second and the command is killed once it passes CAP_MB, so a
run that would exhaust a shared machine's memory stops and is reported as "killed".
Standard library only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return 0


def main(cap_mb: int, out: str, command: list[str]) -> str:
    with open(out, "wb") as sink:
        start = time.perf_counter()
        proc = subprocess.Popen(command, stdout=sink, start_new_session=True)
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if not killed and _rss_kb(proc.pid) > cap_mb * 1024:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
            time.sleep(0.1)
        wall = time.perf_counter() - start
    code = "killed" if killed else f"exit {os.waitstatus_to_exitcode(status)}"
    return f"{wall:.2f} s, {usage.ru_maxrss} KB peak RSS, {os.path.getsize(out)} bytes out, {code}"


if __name__ == "__main__":
    cap, out, sep, *cmd = sys.argv[1:]
    assert sep == "--", __doc__
    print(main(int(cap), out, cmd))
