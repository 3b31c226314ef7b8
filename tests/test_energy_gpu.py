"""NVML board energy of a GPU run: non-zero, growing with the run's length. Run on a GPU node:
python3 -m pytest -q -s -m gpu tests/test_energy_gpu.py (tests/test_energy.py checks the no-NVML path in CI)."""

import pytest

from conftest import require_gpu
from test_resident_gpu import RESIDENT, run, summary, write_config

pytestmark = pytest.mark.gpu


def test_energy_is_measured_and_grows_with_the_run(tmp_path):
    require_gpu()
    loop = {}
    for ms in (10.0, 40.0):
        # cells at rest (no stimulus): the same work every step, and Forward Euler stays in range for any length
        cfg = write_config(tmp_path, "tt06", "bidomain", "2D", duration=ms, amp=0.0)
        out, _ = run(tmp_path, cfg, f"run{int(ms)}", RESIDENT)
        e = summary(out)["energy"]
        print(f"\n{ms:g} ms: {e}")
        assert e["available"] and e["gpus"] == 1
        loop[ms] = e["loop_j"]
    assert 0 < loop[10.0] < loop[40.0]
