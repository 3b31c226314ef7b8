"""The Niederer et al. 2011 slab at its coarse resolution (dx 0.5 mm, all three dt), on 2 ranks with the native
TT06 kernel: every point activates, the activation order follows the geometry, and dt matters little
(verification.md §3: "expect convergence in dx to dominate and dt to matter little")."""

import numpy as np
import pytest

from cardiosim.bench import niederer


pytestmark = [pytest.mark.mpi, pytest.mark.slow]   # three runs on 2 ranks, 30,000 steps the longest: ~7 min


@pytest.fixture(scope="module")
def coarse(tmp_path_factory):
    out = tmp_path_factory.mktemp("niederer")
    return {r["dt_ms"]: r for r in (niederer.run_one(f"dx0.5_dt{dt}", 2, out) for dt in niederer.DT)}


def test_coarse_runs_activate_in_order(coarse):
    for dt, r in coarse.items():
        p = r["points"]
        print(f"\ndt {dt} ms: " + " ".join(f"{k} {v:.2f}" for k, v in p.items()) + f"  ({r['wall_s']:.0f} s)")
        assert r["not_activated"] == 0
        assert p["P1"] < 3.0                                      # inside the stimulated cube
        assert max(p.values()) == p["P8"]                         # the far corner is last
        assert p["P1"] < p["P5"] < p["P3"] < p["P2"] < p["P8"]    # 3 mm, then 20 mm along, then 7 mm across
        assert p["P3"] < p["P9"] < p["P8"]
        assert np.all(np.diff(r["diagonal"]) >= -1e-9)           # monotone along P1→P8


def test_coarse_runs_hardly_depend_on_dt(coarse):
    # The ODE step is dt/k = 0.002, 0.002, 0.00167 ms in the three runs, so what dt changes is the splitting and
    # the parabolic step; at dx 0.5 mm that moves activation by hundredths of a millisecond.
    spread = {k: np.ptp([r["points"][k] for r in coarse.values()]) for k in niederer.POINTS}
    print("\nspread over dt (ms): " + " ".join(f"{k} {v:.4f}" for k, v in spread.items()))
    assert max(spread.values()) < 0.05


def test_coarse_run_sits_among_the_published_codes(coarse):
    """dx 0.5 mm, dt 0.01 ms: every published point within one standard deviation of the eleven codes' mean
    (cardiosim/bench/niederer_published.py)."""
    from cardiosim.bench import niederer_published as pub
    rows = pub.compare(coarse[0.01]["points"], niederer.POINTS, 0.5)
    assert len(rows) == 8
    for label, pos, ours, mean, sd in rows:
        print(f"{label} {pos}: {ours:.2f} ms, eleven codes {mean:.2f} ± {sd:.2f} ms")
        assert abs(ours - mean) < sd, f"{label}: {ours:.2f} ms is outside {mean} ± {sd} ms"
