"""The arrhythmia analysis on a real run: run/spiral-s1s2.toml (a spiral by the S1-S2 cross-field protocol, one
rank, about 20 s) against what the protocol and the run's own probe traces say."""

from pathlib import Path

import numpy as np
import pytest

from cardiosim.output import rhythm
from cardiosim.output.results import Results
from conftest import run_cli

CONFIG = Path(__file__).resolve().parents[1] / "run" / "spiral-s1s2.toml"
WINDOW = (300.0, 700.0)             # ms: after S2 (195 ms) the spiral has formed by about 250 ms


@pytest.mark.slow
def test_spiral_tip_and_cycle_length(tmp_path):
    out = tmp_path / "spiral.h5"
    run_cli(["run", CONFIG, "--quiet", "--output", out], cwd=tmp_path, check=True, timeout=600)
    with Results(out) as r:
        tracks, s, found, _ = rhythm.tracks(r, window=WINDOW)
        # one tip in every snapshot, followed as one track, near the corner of the S2 quadrant where it formed
        assert [len(d) for d in found] == [1] * len(s.t)
        assert len(tracks) == 1 and len(tracks[0].t) == len(s.t) and s.t[-1] - s.t[0] > 300.0
        assert np.hypot(tracks[0].x - 1.5, tracks[0].y - 1.5).max() < 0.3
        # far from the core: the cycle length from the snapshots (every 5 ms) is the probe's, every PDE step
        df, resolution, cl, _ = rhythm.dominant_frequency(r, window=WINDOW)
        beats = r.beats("far")["activation"]
        probe_cl = float(np.median(np.diff(beats[(beats >= WINDOW[0]) & (beats <= WINDOW[1])])))
        far = (6, 6)                                           # node (0.3, 0.3) cm, [y, x]
        assert 100.0 < probe_cl < 200.0
        assert abs(cl[far] - probe_cl) <= 5.0
        assert abs(df[far] - 1000.0 / probe_cl) <= resolution
