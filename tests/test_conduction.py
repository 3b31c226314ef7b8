"""A plane wave's conduction velocity converges as dx is halved (monodomain cable, Mitchell–Schaeffer)."""

import numpy as np

from cardiosim import config
from cardiosim.analysis.maps import activation_time, conduction_velocity

CABLE = """
[simulation]
equations = "monodomain"
duration = 30.0
dt = 0.005
progress_interval = 0
[grid]
size = [1.0]
spacing = {dx}
[tissue]
sigma_il = 1.74
sigma_it = 0.19
sigma_el = 6.25
sigma_et = 2.36
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.05]
duration = 1.0
current_density = -30.0
[[probe]]
name = "x1"
position = [0.3]
[[probe]]
name = "x2"
position = [0.7]
"""


def cv(petsc, tmp_path, dx):
    from cardiosim.simulation.loop import Simulation
    cfg = config.loads(CABLE.format(dx=dx), name=f"cable-{dx}")
    sim = Simulation(cfg, output_path=tmp_path / f"cable-{dx}.h5")
    t, v = [], {"x1": [], "x2": []}
    nodes = {p.name: sim.grid.local_offset(sim.grid.nearest_node(p.position)) for p in cfg.probe}

    def record(s):
        t.append(s.t)
        arr = s.V.getArray()
        for k, off in nodes.items():
            v[k].append(arr[off])

    sim.run(on_step=record)
    t = np.array(t)
    t1, t2 = activation_time(t, v["x1"]), activation_time(t, v["x2"])
    return conduction_velocity(0.3, t1, 0.7, t2)


def test_conduction_velocity_converges(petsc, tmp_path):
    dxs = [0.02, 0.01, 0.005, 0.0025]
    cvs = [cv(petsc, tmp_path, dx) for dx in dxs]
    print("\n    dx (cm)   CV (m/s)   change")
    for i, (dx, c) in enumerate(zip(dxs, cvs)):
        change = f"{10 * (c - cvs[i - 1]):+.5f}" if i else ""
        print(f"{dx:11.4f} {10 * c:10.5f}   {change}")
    diffs = np.abs(np.diff(cvs))
    ratios = diffs[:-1] / diffs[1:]
    print("ratios of successive changes:", np.round(ratios, 2))
    assert all(r > 2.5 for r in ratios)          # second order: → 4
    assert 0.2 < 10 * cvs[-1] < 1.0              # a plausible cardiac speed, m/s
