"""The pseudo-ECG (cardiosim/analysis/ecg.py): against the exact integral of its formula for a plane wave in a sheet, in a
run (electrodes, leads, the output file, a restart, inspect and plot), and bad input."""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest

from cardiosim import config
from conftest import run_cli
from test_bad_input import assert_one_line

LX, LY = 2.0, 0.5                       # cm
XC, W, A = 1.0, 0.05, 50.0              # the front: V = −35 + A·tanh((x − XC)/W) mV
SIGMA_IL, SIGMA_B, THICK = 1.74, 2.0, 0.01
ELECTRODES = [(1.3, 0.25, 0.4), (0.2, 0.9, 0.3), (2.6, -0.3, 0.2)]     # cm, off the sheet (z ≠ 0)


def front(x):
    return -35.0 + A * np.tanh((x - XC) / W)


def front_dd(x):
    """V'' (mV/cm²)."""
    th = np.tanh((x - XC) / W)
    return -2.0 * A / W ** 2 * th * (1.0 - th ** 2)


def exact(e):
    """φ at electrode e = (x, y, z) of the formula, t σ_il/(4π σ_b) ∫∫ V''(x) / r dx dy over the sheet: the y
    integral in closed form (asinh), the x integral by Gauss–Legendre on 4000 panels."""
    xe, ye, ze = e
    nodes, weights = np.polynomial.legendre.leggauss(8)
    edges = np.linspace(0.0, LX, 4001)
    mid, half = 0.5 * (edges[1:] + edges[:-1]), 0.5 * np.diff(edges)
    x = (mid[:, None] + half[:, None] * nodes[None]).ravel()
    wx = (half[:, None] * weights[None]).ravel()
    a = np.sqrt((x - xe) ** 2 + ze ** 2)
    inner = np.arcsinh((LY - ye) / a) - np.arcsinh((0.0 - ye) / a)
    return THICK * SIGMA_IL / (4 * math.pi * SIGMA_B) * np.sum(wx * front_dd(x) * inner)


def discrete(h):
    from cardiosim.analysis.ecg import PseudoEcg
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.equations import Monodomain
    electrodes = "\n".join(f'[[ecg.electrodes]]\nname = "e{i}"\nposition = {list(e)}' for i, e in enumerate(ELECTRODES))
    cfg = config.loads(f"""
[simulation]
duration = 1.0
dt = 0.01
[grid]
size = [{LX}, {LY}]
spacing = {h}
[tissue]
sigma_il = {SIGMA_IL}
[ecg]
bath_conductivity = {SIGMA_B}
sheet_thickness = {THICK}
{electrodes}
""")
    grid = Grid(cfg)
    tissue = Monodomain(grid, cfg, "star")
    ecg = PseudoEcg(cfg, grid, tissue.intracellular())
    V = grid.vec()
    V.getArray()[:] = front(grid.coords()[:, 0])
    return np.array(ecg(V))


def test_plane_wave_against_the_exact_integral(petsc, capsys):
    """Second order in h: the discrete source −K_i V is the weak form's, and the front lies far from the sheet's
    edges (V' = 0 there, so the no-flux surface carries no source)."""
    ref = np.array([exact(e) for e in ELECTRODES])
    hs = (0.02, 0.01, 0.005)
    errs = [np.max(np.abs(discrete(h) - ref)) for h in hs]
    with capsys.disabled():
        print(f"\npseudo-ECG of a plane wave: exact {ref} mV; max error {errs} at h = {hs} cm")
    assert np.all(np.abs(ref) > 1e-3)
    assert errs[-1] < 1e-3 * np.max(np.abs(ref))
    for coarse, fine in zip(errs, errs[1:]):
        assert 3.0 < coarse / fine < 5.0                          # order 2


RUN = """
[simulation]
equations = "bidomain"
duration = {duration}
dt = 0.02
progress_interval = 0
[grid]
size = [0.4, 0.2]
spacing = 0.01
[tissue]
label_file = "labels.npy"
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "sphere"
center = [0.12, 0.1]
radius = 0.04
duration = 1.0
current_density = -150.0
[ecg]
[[ecg.electrodes]]
name = "left"
position = [-0.3, 0.1, 0.0]
[[ecg.electrodes]]
name = "right"
position = [0.7, 0.1, 0.0]
[[ecg.electrodes]]
name = "above"
position = [0.2, 0.1, 0.5]
[[ecg.leads]]
name = "I"
plus = "right"
minus = "left"
[output]
interval = 1.0
"""


def _labels(folder):
    """A disc of tissue in the box."""
    y, x = np.mgrid[0:21, 0:41] * 0.01
    np.save(folder / "labels.npy", ((x - 0.2) ** 2 + (y - 0.1) ** 2 <= 0.095 ** 2).astype(np.int8))


def _datasets(path):
    with h5py.File(path) as f:
        out = {}
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def test_run_writes_the_ecg_and_restarts_it(tmp_path):
    """Electrodes and a lead in a masked bidomain run: written every step under /ecg, lead = right − left, the
    wave seen (a deflection of more than 1 µV); a finished run lengthened from its checkpoint gives the longer
    run's file bit for bit, /ecg included; inspect and plot show the traces."""
    _labels(tmp_path)
    cfg = tmp_path / "ecg.toml"
    cfg.write_text(RUN.format(duration=6.0))
    long_, short = tmp_path / "long.h5", tmp_path / "short.h5"
    run_cli(["run", cfg, "--output", long_, "--quiet"], check=True)
    run_cli(["run", cfg, "--output", short, "--quiet", "--set", "simulation.duration=4.0",
             "--set", "checkpoint.interval=2.0"], check=True)
    run_cli(["run", cfg, "--output", short, "--quiet", "--restart", tmp_path / "short.ckpt.h5"], check=True)
    a, b = _datasets(long_), _datasets(short)
    assert sorted(a) == sorted(b)
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name
    e = {k.split("/")[1]: v for k, v in a.items() if k.startswith("ecg/")}
    assert sorted(e) == ["I", "above", "left", "right"]
    assert len(e["I"]) == len(a["probes/time"]) == 301
    assert np.array_equal(e["I"], e["right"] - e["left"])
    assert np.ptp(e["above"]) > 1e-3 and np.ptp(e["I"]) > 1e-3                # mV: a sheet 0.01 cm thick
    assert "tissue" in [k.split("/")[1] for k in a if k.startswith("maps/")]
    ins = run_cli(["inspect", long_], check=True).stdout
    assert "pseudo-ECG: 4 traces, 301 samples" in ins and "lead right - left" in ins
    run_cli(["plot", long_, "--out", tmp_path / "png"], check=True)
    assert (tmp_path / "png" / "long_ecg.png").stat().st_size > 0
    assert (tmp_path / "png" / "long_tissue.png").stat().st_size > 0


MDOT_LAYOUTS = """
import numpy as np
from cardiosim import api
api.start_petsc()
from petsc4py import PETSc
n, k = 1001, 3
rng = np.random.default_rng(1)
x = PETSc.Vec().createWithArray(rng.standard_normal(n), comm=PETSc.COMM_SELF)
w = rng.standard_normal((k, n))
block = np.empty((k, n + 2))                        # one after another, 2 entries apart
apart = [np.empty(n + 1000)[:n] for _ in range(k)]  # each on its own, far apart
dots = []
for arrays in ([block[i, :n] for i in range(k)], apart):
    for a, wi in zip(arrays, w):
        a[:] = wi
    dots.append(x.mDot([PETSc.Vec().createWithArray(a, comm=PETSc.COMM_SELF) for a in arrays]))
print(np.array_equal(*dots), np.array(dots[0]) - np.array(dots[1]))
"""


def test_multi_dot_does_not_depend_on_where_the_vectors_lie():
    """The pseudo-ECG's electrode weights in one VecMDot: with PETSc's default (-vec_mdot_use_gemv 1) the sums'
    order, and so their last bits, followed the vectors' addresses (one BLAS gemv over those lying at one stride),
    so a restarted run, a new process with another heap, wrote another ECG. PETSc as cardiosim starts it
    (cardiosim.api.REPRODUCIBLE) gives the same dots bit for bit however the vectors lie."""
    import subprocess
    import sys
    proc = subprocess.run([sys.executable, "-c", MDOT_LAYOUTS], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("True"), proc.stdout


@pytest.mark.parametrize("case,edit,words", [
    ("electrode in the tissue", ('position = [-0.3, 0.1, 0.0]', 'position = [0.2, 0.1, 0.0]'),
     ["ecg.electrodes[0].position", "'left'", "inside the tissue"]),
    ("electrode at the surface", ('position = [-0.3, 0.1, 0.0]', 'position = [0.1, 0.1, 0.0]'),
     ["ecg.electrodes[0].position", "inside the tissue"]),
    ("lead of no electrode", ('minus = "left"', 'minus = "leftt"'), ["ecg.leads[0].minus", "'leftt'"]),
    ("name twice", ('name = "I"', 'name = "left"'), ["ecg.leads[0].name", "used twice"]),
    ("lead both ways", ('minus = "left"', 'minus = "left"\nweights = {right = 1.0}'), ["ecg.leads[0]", "not both"]),
    ("lead neither way", ('plus = "right"\nminus = "left"', ''), ["ecg.leads[0]", "not neither"]),
    ("weight of no electrode", ('plus = "right"\nminus = "left"', 'weights = {right = 1.0, lft = -1.0}'),
     ["ecg.leads[0].weights.lft", "no electrode 'lft'"]),
    ("bath conductivity", ("[ecg]", "[ecg]\nbath_conductivity = 0"), ["ecg.bath_conductivity"]),
])
def test_bad_ecg_input_is_one_line(tmp_path, case, edit, words):
    _labels(tmp_path)
    cfg = tmp_path / "bad.toml"
    text = RUN.format(duration=1.0)
    assert edit[0] in text
    cfg.write_text(text.replace(edit[0], edit[1], 1))
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5"])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "bad.h5").exists()


def test_weighted_leads_are_their_sums(petsc):
    """A lead given by weights is Σ weight·φ(electrode) (augmented limb leads, Wilson's terminal); a plus/minus lead
    is the difference, bit for bit; the output's attribute says the formula."""
    from cardiosim.analysis.ecg import PseudoEcg
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.equations import Monodomain
    cfg = config.loads(f"""
[simulation]
duration = 1.0
dt = 0.01
[grid]
size = [{LX}, {LY}]
spacing = 0.02
[[ecg.electrodes]]
name = "RA"
position = [-0.5, 0.3, 0.2]
[[ecg.electrodes]]
name = "LA"
position = [1.5, 0.3, 0.2]
[[ecg.electrodes]]
name = "LL"
position = [0.5, -1.0, 0.3]
[[ecg.leads]]
name = "II"
plus = "LL"
minus = "RA"
[[ecg.leads]]
name = "aVR"
weights = {{RA = 1.0, LA = -0.5, LL = -0.5}}
""")
    grid = Grid(cfg)
    ecg = PseudoEcg(cfg, grid, Monodomain(grid, cfg, "star").intracellular())
    V = grid.vec()
    V.getArray()[:] = np.random.default_rng(1).normal(size=grid.n_local)
    ra, la, ll, ii, avr = ecg(V)
    assert abs(ra) > 0 and ii == ll - ra
    assert avr == pytest.approx(ra - 0.5 * la - 0.5 * ll, rel=1e-14, abs=0)
    assert [lead.formula() for lead in cfg.ecg.leads] == ["LL - RA", "1 RA - 0.5 LA - 0.5 LL"]
