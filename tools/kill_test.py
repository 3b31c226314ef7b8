"""Kill a writing run with SIGKILL at random moments, many times; every file must open with plain h5py and its
complete snapshots and probe samples must equal those of the same run left to finish.

    .venv/bin/python tools/kill_test.py [KILLS] [SEED]      (default 25 kills, seed 0; a few minutes)

The run (tests/configs/sheet.toml at 0.01 cm, 101 x 41 nodes, a snapshot every PDE step for 6 ms) spends much of
its time writing, so kills land inside writes too. docs/user/output-format.md quotes the result.
"""

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--quiet", "--set", "simulation.duration=6.0", "--set", "output.interval=0.02",
        "--set", "grid.spacing=0.01"]


def main(kills: int, seed: int) -> int:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    run = [sys.executable, "-m", "cardiosim", "run", str(ROOT / "tests" / "configs" / "sheet.toml")]
    rng = np.random.default_rng(seed)
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        ref = d / "ref.h5"
        subprocess.run([*run, "--output", str(ref), *ARGS], check=True, env=env)
        with h5py.File(ref, "r") as g:
            for k in range(kills):
                out = d / f"k{k}.h5"
                proc = subprocess.Popen([*run, "--output", str(out), *ARGS], env=env)
                while not out.with_suffix(".xdmf").exists() and proc.poll() is None:
                    time.sleep(0.01)
                time.sleep(rng.uniform(0, 3.0))
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                try:
                    with h5py.File(out, "r") as f:
                        t = f["fields/time"][:]
                        n = int(np.isfinite(t).sum())
                        pt = f["probes/time"][:]
                        m = int(np.isfinite(pt).sum())
                        ok = (np.isfinite(t[:n]).all() and np.isfinite(pt[:m]).all()
                              and all(np.array_equal(f["fields"][q][:n], g["fields"][q][:n]) for q in ("Vm", "phi_e"))
                              and all(np.array_equal(f[f"probes/{p}/Vm"][:m], g[f"probes/{p}/Vm"][:m])
                                      for p in ("near", "middle", "far")))
                    print(f"kill {k}: {n} snapshots, {m} probe samples complete: {'ok' if ok else 'MISMATCH'}",
                          flush=True)
                    bad += not ok
                except Exception as e:   # noqa: BLE001 - any failure to read is what we look for
                    print(f"kill {k}: cannot read the file: {e}", flush=True)
                    bad += 1
                for p in (out, out.with_suffix(".xdmf")):
                    p.unlink(missing_ok=True)
    print(f"{kills - bad} of {kills} killed runs readable and equal to the finished run")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 25, int(sys.argv[2]) if len(sys.argv) > 2 else 0))
