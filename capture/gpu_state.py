"""What the GPU was doing: ``nvidia-smi`` snapshots and NVML clock sampling during a run.

An idle H200 sits at a 345 MHz SM clock and a short benchmark can run while clocks ramp, so
the harness samples SM and memory clocks, utilization and power every few milliseconds while
it measures. Without NVML (``nvidia-ml-py``) the samples are empty and say why.
"""

from __future__ import annotations

import os
import subprocess
import threading
import time

SMI_FIELDS = (
    "name",
    "driver_version",
    "pstate",
    "clocks.sm",
    "clocks.mem",
    "clocks.max.sm",
    "utilization.gpu",
    "utilization.memory",
    "power.draw",
    "temperature.gpu",
    "memory.used",
)


def _smi(*args: str) -> list[list[str]] | str:
    try:
        out = subprocess.run(["nvidia-smi", *args, "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if out.returncode != 0:
        return out.stderr.strip() or f"nvidia-smi exited {out.returncode}"
    return [[v.strip() for v in line.split(",")] for line in out.stdout.strip().splitlines() if line.strip()]


def visible_gpu() -> str:
    """The GPU a CUDA program here runs on: the first entry of ``CUDA_VISIBLE_DEVICES`` (an
    index or a ``GPU-<uuid>``), or ``"0"``."""
    return (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0].strip() or "0"


def smi_snapshot(index: str | int | None = None) -> dict[str, object]:
    """One ``nvidia-smi`` reading of GPU ``index`` (default: the visible one): clocks,
    utilization, power, temperature, and the compute processes on it (another process there
    means the measurement shares the GPU)."""
    index = visible_gpu() if index is None else index
    rows = _smi(f"--id={index}", f"--query-gpu={','.join(SMI_FIELDS)}")
    if isinstance(rows, str):
        return {"error": rows}
    snap: dict[str, object] = dict(zip(SMI_FIELDS, rows[0], strict=True))
    apps = _smi(f"--id={index}", "--query-compute-apps=pid,process_name,used_memory")
    snap["compute_apps"] = apps if isinstance(apps, list) else []
    return snap


class ClockSampler:
    """Samples the GPU (by CUDA device UUID, or NVML index) on a background thread, tagging each
    sample with the current phase. ``samples()`` returns columns: t_s, phase, sm_mhz, mem_mhz, util_gpu,
    util_mem, power_w, temp_c, reasons (NVML's clock-event reason bits; -1 where NVML gives none)."""

    COLUMNS = ("t_s", "phase", "sm_mhz", "mem_mhz", "util_gpu", "util_mem", "power_w", "temp_c", "reasons")

    def __init__(self, uuid: object, interval_s: float = 0.005):
        self.interval_s = interval_s
        self._rows: list[tuple] = []
        self._phase = "idle"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error = ""
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = self._find(pynvml, str(uuid))
            self._reasons = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or getattr(
                pynvml, "nvmlDeviceGetCurrentClocksThrottleReasons", None
            )
        except Exception as exc:  # no NVML: the run goes on without samples
            self._nvml = None
            self.error = f"NVML unavailable: {type(exc).__name__}: {exc}"

    @staticmethod
    def _find(nvml, uuid: str):
        if uuid.isdigit():
            return nvml.nvmlDeviceGetHandleByIndex(int(uuid))
        for i in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(i)
            found = nvml.nvmlDeviceGetUUID(handle)
            found = found.decode() if isinstance(found, bytes) else found
            if found.removeprefix("GPU-") == uuid.removeprefix("GPU-"):
                return handle
        return nvml.nvmlDeviceGetHandleByIndex(0)

    def phase(self, name: str) -> None:
        self._phase = name

    def _sample(self, t0: float) -> None:
        nv, h = self._nvml, self._handle
        util = nv.nvmlDeviceGetUtilizationRates(h)
        self._rows.append(
            (
                round(time.perf_counter() - t0, 6),
                self._phase,
                nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
                nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
                util.gpu,
                util.memory,
                nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
                nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
                self._reason_bits(),
            )
        )

    def _reason_bits(self) -> int:
        try:
            return int(self._reasons(self._handle)) if self._reasons else -1
        except Exception:  # not supported on this GPU or driver
            return -1

    def _loop(self) -> None:
        t0 = time.perf_counter()
        while not self._stop.is_set():
            try:
                self._sample(t0)
            except Exception as exc:
                self.error = f"NVML sampling stopped: {type(exc).__name__}: {exc}"
                return
            self._stop.wait(self.interval_s)

    def start(self) -> None:
        if self._nvml is not None:
            self._thread = threading.Thread(target=self._loop, name="clock-sampler", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def other_processes(self) -> list[int]:
        """PIDs of other compute processes on this GPU right now (NVML), or [] without NVML."""
        if self._nvml is None:
            return []
        try:
            procs = self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)
        except Exception:
            return []
        return sorted({p.pid for p in procs} - {os.getpid()})

    def samples(self) -> dict[str, object]:
        cols: dict[str, object] = {c: [row[i] for row in self._rows] for i, c in enumerate(self.COLUMNS)}
        cols["error"] = self.error
        return cols
