"""Does the D2D memcpy (the ``copy`` control) run on the SMs or on a copy engine?

    PYTHONPATH=. python3 probes/memcpy_engine.py > reports/probes/memcpy-engine.txt   # on the H200

A spin kernel fills every SM (as many resident blocks as fit, each busy-waiting about 5 ms on
its clock) on one stream; a 64 MiB device-to-device copy is issued on a second stream just
after it. CUDA events time the copy alone, then beside the spin kernel. A copy done by SM
kernels has no SM to run on until the spin kernel ends, so it finishes only after it; a copy
engine runs it at once.
"""

from __future__ import annotations

import cupy as cp
import torch

SPIN = r"""
extern "C" __global__ void spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) {}
}
"""


def main() -> None:
    props = torch.cuda.get_device_properties(0)
    spin = cp.RawKernel(SPIN, "spin")
    x = torch.randn(4096, 4096, device="cuda")
    y = torch.empty_like(x)
    copy_stream, spin_stream = torch.cuda.Stream(), torch.cuda.Stream()
    cycles = cp.int64(cp.cuda.runtime.getDeviceProperties(0)["clockRate"] * 5)  # kHz x 5 ms
    blocks = props.multi_processor_count * 8  # 8 blocks of 256 threads: every SM's thread slots

    def timed_copy(beside_spin: bool) -> tuple[float, float]:
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
        torch.cuda.synchronize()
        if beside_spin:
            with torch.cuda.stream(spin_stream):
                ev[2].record()
                with cp.cuda.ExternalStream(spin_stream.cuda_stream):
                    spin((blocks,), (256,), (cycles,))
                ev[3].record()
        with torch.cuda.stream(copy_stream):
            ev[0].record()
            y.copy_(x)
            ev[1].record()
        torch.cuda.synchronize()
        spin_ms = ev[2].elapsed_time(ev[3]) if beside_spin else float("nan")
        end_after_spin_start = ev[2].elapsed_time(ev[1]) if beside_spin else float("nan")
        return ev[0].elapsed_time(ev[1]) * 1e3, spin_ms * 1e3, end_after_spin_start * 1e3

    for _ in range(3):
        timed_copy(False)
    print(f"{torch.cuda.get_device_name()}: 64 MiB D2D copy, µs")
    for rep in range(3):
        alone, _, _ = timed_copy(False)
        beside, spin_us, end_us = timed_copy(True)
        print(
            f"{rep}  alone {alone:9.1f}   beside the spin kernel {beside:9.1f}"
            f"   (spin kernel {spin_us:9.1f}; copy ended {end_us:9.1f} after the spin kernel began)"
        )


if __name__ == "__main__":
    main()
