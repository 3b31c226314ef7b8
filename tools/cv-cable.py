#!/usr/bin/env python3
"""Conduction velocity of a cell model in a 1D monodomain cable at a given grid spacing and conductivities: how
run/biv-ecg.toml's conductivities were calibrated for its 0.5 mm grid (docs/user/ventricles.md section 6), the way
openCARP's tuneCV calibrates them (Costa et al. 2013): measure the fine grid's velocity with the conductivities
you mean, then scale them on the coarse grid until it gives the same.

    .venv/bin/python tools/cv-cable.py --spacing 0.01 --dt 0.01 --sigma 1.74 6.25      # fine: 0.42 m/s
    .venv/bin/python tools/cv-cable.py --spacing 0.05 --dt 0.05 --sigma 3.74 13.44     # 0.5 mm, x2.15: 0.43 m/s

A cable 2 cm long stimulated at its left end (0.15 cm, 1 ms); the velocity is 1 cm over the difference of the
activation times (first crossing of 0 mV) at 0.5 and 1.5 cm; "no conduction" where the front does not reach
1.5 cm within --duration. --sigma gives the intracellular and extracellular conductivity along the cable (mS/cm;
the monodomain takes their harmonic mean): for the transverse velocity give the transverse pair.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import h5py
import numpy as np

ROOT = Path(__file__).resolve().parents[1]
CONFIG = """
[simulation]
equations = "monodomain"
duration = {duration}
dt = {dt}
ode_substeps = {k}
progress_interval = 0
[grid]
size = [2.0]
spacing = {h}
[tissue]
sigma_il = {si}
sigma_el = {se}
[cell]
model = "{model}"
integrator = "{integrator}"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.15]
duration = 1.0
current_density = -80.0
[[probe]]
name = "a"
position = [0.5]
[[probe]]
name = "b"
position = [1.5]
[output]
interval = {duration}
fields = ["Vm"]
"""


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default=str(ROOT / "models" / "ohara_rudy_2011_endo.cellml"))
    p.add_argument("--integrator", default="rush-larsen")
    p.add_argument("--spacing", type=float, required=True, help="cm")
    p.add_argument("--dt", type=float, required=True, help="ms, the PDE step (2 ODE substeps each)")
    p.add_argument("--sigma", type=float, nargs=2, required=True, metavar=("INTRA", "EXTRA"), help="mS/cm")
    p.add_argument("--duration", type=float, default=150.0, help="ms")
    a = p.parse_args()
    with tempfile.TemporaryDirectory() as d:
        cfg, out = Path(d) / "cable.toml", Path(d) / "cable.h5"
        cfg.write_text(CONFIG.format(duration=a.duration, dt=a.dt, k=2, h=a.spacing, si=a.sigma[0], se=a.sigma[1],
                                     model=a.model, integrator=a.integrator))
        run = subprocess.run([sys.executable, "-m", "cardiosim", "run", str(cfg), "--output", str(out), "--quiet"],
                             capture_output=True, text=True)
        if run.returncode != 0 and not out.exists():
            print(run.stderr.strip(), file=sys.stderr)
            return run.returncode
        with h5py.File(out) as f:
            t = f["probes/time"][:]
            v = {n: f[f"probes/{n}/Vm"][:] for n in "ab"}
    crossed = {n: t[np.argmax(x > 0.0)] if (x > 0.0).any() else None for n, x in v.items()}
    what = f"h = {a.spacing:g} cm, dt = {a.dt:g} ms, sigma = {a.sigma[0]:g} / {a.sigma[1]:g} mS/cm"
    if crossed["a"] is None or crossed["b"] is None:
        print(f"{what}: no conduction (the front did not reach 1.5 cm within {a.duration:g} ms)")
    else:
        print(f"{what}: {10.0 / (crossed['b'] - crossed['a']):.3f} m/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
