"""Cost of the host activation and APD maps (cardiosim.analysis.maps, the CPU placements' per-step "io") on a synthetic
wave: every node a copy of the CVODE TT06 epi beat (tests/data/reference), arriving over 60 ms, 400 ms in all.

    python tools/bench_maps.py [NODES] [DT_MS]        # defaults 58176 (Niederer slab, dx 0.2 mm) and 0.05

Prints the wall and CPU time per update of both maps (µs). The data of the step are made outside the timed part
and are warm in the cache, unlike in a run (where the PDE solve comes in between): a lower bound of the cost there.
"""

import sys
import time
from pathlib import Path

import numpy as np

from cardiosim.analysis.maps import ActivationMap, APDMap

REFERENCE = Path(__file__).resolve().parent.parent / "tests" / "data" / "reference" / "tt06" / "trace_epi_1Hz_beat1.csv"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 58176
    dt = float(sys.argv[2]) if len(sys.argv) > 2 else 0.05            # ms, the PDE step
    d = np.loadtxt(REFERENCE, delimiter=",", skiprows=1)
    t = np.arange(0.0, 400.0, dt)                                       # ms
    arrival = np.linspace(0.0, 60.0, n)                                 # ms, per node
    fine = 0.05                                                         # ms, the beat's resampling step
    beat = np.interp(np.arange(-100.0, 500.0, fine), d[:, 0], d[:, 1], left=d[0, 1], right=d[-1, 1])

    def v_at(i):
        k = np.clip(np.round((t[i] - arrival) / fine).astype(int) + int(100.0 / fine), 0, beat.size - 1)
        return beat[k]

    v0 = v_at(0)
    act = ActivationMap(v0.copy(), 0.0)
    apd = APDMap(act, v0.copy(), 90.0)
    wall = cpu = 0.0
    for i in range(1, len(t)):
        v = v_at(i)
        w, c = time.perf_counter(), time.thread_time()
        act.update(t[i - 1], t[i], v)
        apd.update(t[i - 1], t[i], v)
        wall += time.perf_counter() - w
        cpu += time.thread_time() - c
    steps = len(t) - 1
    print(f"{n} nodes, {steps} steps of {dt:g} ms: {wall / steps * 1e6:.1f} µs per step wall, "
          f"{cpu / steps * 1e6:.1f} µs CPU; not activated {np.isnan(act.time).sum()}, "
          f"not repolarised {np.isnan(apd.repolarisation).sum()}")


if __name__ == "__main__":
    main()
