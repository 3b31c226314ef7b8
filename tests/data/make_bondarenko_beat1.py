"""NumPy reference for the GPU kernel tests: one beat (1000 ms at 1 Hz) of Bondarenko apical cells, Forward Euler
at dt = 1e-4 ms, with the NumPy backend (cardiosim.cells.bondarenko, the reference every kernel is checked against).

Five cells, one per stimulus group of tests/test_cuda_kernels.py: -80 pA/pF for 0.5 ms starting at 1, 2, 3, 4 ms, and
one never stimulated. The time of substep j of launch i is i*k*dt + j*dt with k = 100, as the kernels compute it, so
that pulse edges fall on the same substeps. Snapshots of all 41 states at 5, 10, 50 and 1000 ms.

About 40 min on one core (1e7 NumPy steps of ~0.23 ms); run once and commit the result:
    .venv/bin/python tests/data/make_bondarenko_beat1.py   ->  tests/data/bondarenko_apical_beat1.npz
"""

import sys
import time
from pathlib import Path

import numpy as np

from cardiosim.cells import make
from cardiosim.cells.stimulus import Protocol

DT, K = 1e-4, 100
STARTS = (1.0, 2.0, 3.0, 4.0)
SNAPS = (5.0, 10.0, 50.0, 1000.0)


def main(out=Path(__file__).with_name("bondarenko_apical_beat1.npz")):
    model = make("bondarenko", "apical")
    n = len(STARTS) + 1
    y = model.initial_state(n)
    work = np.empty_like(y)
    protocols = [Protocol(s, 0.5, 0.0, 1) for s in STARTS]
    snap_launch = {int(round(t / (K * DT))) - 1: t for t in SNAPS}
    n_launch = max(snap_launch) + 1
    snaps = {}
    i_stim = np.zeros(n)
    t_start = time.perf_counter()
    for i in range(n_launch):
        t0 = i * K * DT
        for j in range(K):
            t = t0 + j * DT
            for p, pr in enumerate(protocols):
                i_stim[p] = -80.0 if pr.active(t) else 0.0
            model.forward_euler(y, t, DT, i_stim, work)
        if i in snap_launch:
            snaps[snap_launch[i]] = y.copy()
            print(f"t = {snap_launch[i]:g} ms after {time.perf_counter() - t_start:.0f} s; V = {y[0]}", flush=True)
    assert np.isfinite(y).all()
    np.savez_compressed(out, times=np.array(sorted(snaps)), states=np.stack([snaps[t] for t in sorted(snaps)]),
                        starts=np.array(STARTS), dt=DT, k=K, state_names=np.array(model.state_names))
    print(f"wrote {out}")


if __name__ == "__main__":
    sys.exit(main())
