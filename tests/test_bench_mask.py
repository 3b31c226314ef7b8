"""cardiosim bench mask's TT06 case at the idealised LV's apex (0.025 cm): the box stencil's undershoot next to the
stimulus, and the cells' integrator that lives with it.

The bench's LV at 0.025 cm stopped after 17 steps with a non-finite cell (tt06, cell 7242, t = 0.33 ms): the tissue
node on the axis at z = −1.725 cm, on the endocardium at the cavity's tip, directly above the top node of the
stimulated sphere. The intracellular conductivity is 9.2:1 anisotropic and the fibres there lie in the wall's plane
(horizontal), so the Q1 (box) stiffness couples that node to the node below it with a positive entry, 38 % of its
diagonal: as the stimulated node depolarises, the node above is pulled down (monodomain the same; isotropic
conductivity none). Forward Euler at 0.002 ms is unstable on TT06's m gate below −85.54 mV (τ_m < dt/2), 0.31 mV
under rest. Here the apex is cut out of the LV (21 × 21 × 22 nodes, the same labels, fibres and stimulus) so
that it takes seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

from cardiosim import config
from cardiosim.bench import mask
from cardiosim.runtime.errors import SimulationError

H = 0.025
HALF, TOP = 10, 22           # the cut: 2·HALF + 1 nodes across the axis, the lowest TOP layers
FE_FLOOR = -85.54            # mV: below it TT06's tau_m < 0.001 ms = dt/2 of the bench's substeps


def apex_config(tmp_path, cell: str, steps: int) -> tuple[config.Config, int]:
    """The bench's LV case (mask.RUN, its stimulus, dt and substeps) on the LV's apex; and the grid index of the
    node above the stimulated sphere's top (the bench's tissue cell 7242)."""
    from cardiosim.domain.anatomy import built_in
    box, fields = built_in("lv", H, log=lambda line: None)
    axis = int(round(-box.origin[0] / H))
    assert abs(box.origin[0] + axis * H) < 1e-9 and abs(box.origin[1] + axis * H) < 1e-9
    cut = (slice(0, TOP), slice(axis - HALF, axis + HALF + 1), slice(axis - HALF, axis + HALF + 1))
    labels, fibres = fields["labels"][cut], fields["fibres"][cut].copy()
    fibres[~(labels > 0) | (np.linalg.norm(fibres, axis=-1) == 0)] = (1.0, 0.0, 0.0)      # as mask.anatomy
    np.save(tmp_path / "labels.npy", labels)
    np.save(tmp_path / "fibres.npy", fibres)
    origin = [float(round(box.origin[0] + (axis - HALF) * H, 10)), float(round(box.origin[1] + (axis - HALF) * H, 10)),
              float(round(box.origin[2], 10))]
    text = mask.RUN.format(duration=0.02 * steps, substeps=10, model="tt06", cell=cell, stim=-52.0,
                           size=[2 * HALF * H, 2 * HALF * H, round((TOP - 1) * H, 10)], h=H, origin=origin,
                           tissue=f'fibre_file = "{tmp_path / "fibres.npy"}"\nlabel_file = "{tmp_path / "labels.npy"}"'
                                  '\nsolve_on = "tissue"',
                           centre=[0.0, 0.0, -2.0], radius=0.25)
    n = 2 * HALF + 1
    k = int(round((-1.725 - box.origin[2]) / H))
    return config.loads(text, name="lv-apex"), (k * n + HALF) * n + HALF


def run(cfg, node: int) -> float:
    """Run to the end; the lowest Vm at ``node`` after any step."""
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(cfg, write_output=False)
    lowest = np.inf
    while sim.step_index < sim.n_steps:
        sim.step()
        lowest = min(lowest, float(sim.V.getArray(readonly=True)[node]))
    return lowest


def test_bench_cells_live_through_the_undershoot_at_the_apex(petsc, tmp_path):
    """The bench's TT06 cells (mask.cell_keys) through the bench's 21 steps and on to 1.2 ms: the node above the
    stimulus goes below Forward Euler's floor (so this exercises the defect) and every cell stays finite."""
    assert mask.cell_integrator("tt06") == "rush-larsen"
    assert mask.cell_integrator("mitchell-schaeffer") == "forward-euler"
    cfg, node = apex_config(tmp_path, mask.cell_keys("tt06", "cpu"), steps=60)
    lowest = run(cfg, node)
    assert lowest < FE_FLOOR - 2.0, lowest               # -88.8 mV measured
    assert lowest > -95.0, lowest


def test_forward_euler_fails_there(petsc, tmp_path):
    """What the bench did before: Forward Euler at 0.002 ms stops at 0.33 ms with the node above the stimulus
    named (the diagnosis above, pinned)."""
    cfg, node = apex_config(tmp_path, 'integrator = "forward-euler"', steps=21)
    with pytest.raises(SimulationError, match=r"tt06: cell \d+, state V = nan mV is not finite at t = 0\.33"):
        run(cfg, node)


def test_masked_over_box_per_round_and_of_the_medians():
    """--rounds: the summary pairs each round's masked and whole-box steps of the default solvers (a GAMG row of the
    same round is left out) and divides the medians."""
    rows = []
    for k, (m, b) in enumerate([(5.0, 12.0), (4.5, 11.0), (4.8, 11.5)], 1):
        rows += [dict(anatomy="lv 0.025 cm", grid="masked", round=k, options="", step_ms=m),
                 dict(anatomy="lv 0.025 cm", grid="box", round=k, options="", step_ms=b),
                 dict(anatomy="lv 0.025 cm", grid="box", round=k, options="-elliptic_pc_type gamg", step_ms=99.0)]
    line, = mask.masked_over_box(rows)
    assert "medians 4.80 / 11.50 ms = **0.417** over 3 round(s)" in line
    assert "(per round: 0.417, 0.409, 0.417)" in line
    assert mask.masked_over_box([r for r in rows if r["grid"] == "box"]) == []
