"""Tissue inside the box (tissue.label_file, cardiosim/domain/mask.py): the surface is no-flux, the box around it does
not matter, and each connected piece of tissue has its own φe constant."""

from __future__ import annotations

import re

import numpy as np
import pytest

from cardiosim import config
from conftest import run_cli
from test_bad_input import assert_one_line

H = 0.01                                           # cm
SHEET = """
[simulation]
equations = "{equations}"
duration = 2.0
dt = 0.01
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = {size}
spacing = {h}
[tissue]
{tissue}
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = {lower}
upper = {upper}
duration = 1.0
current_density = -150.0
"""
BOX = (40, 10)              # cells of the box (x, y)
RECT = ((4, 34), (2, 8))    # its tissue: node ranges [a, b] per dimension (both ends included)
TIGHT = {"parabolic": "1e-13", "elliptic": "1e-13"}


def _config(equations, size, lower, upper, tissue=""):
    return config.loads(SHEET.format(equations=equations, size=list(size), h=H, lower=list(lower),
                                     upper=list(upper), tissue=tissue))


def _run(cfg):
    from petsc4py import PETSc
    from cardiosim.simulation.loop import Simulation
    opts = PETSc.Options()
    for k, v in TIGHT.items():
        opts[f"{k}_ksp_rtol"] = v
    try:
        sim = Simulation(cfg, write_output=False)
        while sim.step_index < sim.n_steps:
            sim.step()
    finally:
        for k in TIGHT:
            opts.delValue(f"{k}_ksp_rtol")
    return sim


def _labels(tmp_path, pieces, shape=None, name="labels.npy"):
    """A label image of the box (ny+1, nx+1) with 1 on the node ranges of each piece (x range, y range)."""
    lab = np.zeros((BOX[1] + 1, BOX[0] + 1) if shape is None else shape, dtype=np.int16)
    for (x0, x1), (y0, y1) in pieces:
        lab[y0:y1 + 1, x0:x1 + 1] = 1
    path = tmp_path / name
    np.save(path, lab)
    return path


@pytest.mark.parametrize("equations", ["monodomain", "bidomain"])
def test_masked_rectangle_equals_the_rectangle_alone(petsc, tmp_path, equations):
    """The rectangle as tissue inside a larger box gives the Vm (and φe) of the rectangle as the whole grid, to
    solver tolerance: nothing crosses the tissue surface, and the nodes outside do not take part."""
    (x0, x1), (y0, y1) = RECT
    lx, ly = (x1 - x0) * H, (y1 - y0) * H
    alone = _run(_config(equations, (lx, ly), (0.0, 0.0), (2 * H, ly)))
    path = _labels(tmp_path, [RECT])
    masked = _run(_config(equations, (BOX[0] * H, BOX[1] * H), (x0 * H, 0.0), ((x0 + 2) * H, BOX[1] * H),
                          tissue=f'label_file = "{path}"'))
    assert masked.grid.mask.n_tissue == (x1 - x0 + 1) * (y1 - y0 + 1) and masked.grid.mask.n_pieces == 1
    assert sum(b.y.shape[1] for b, _ in masked.reaction.backend.pieces) == masked.grid.mask.n_tissue     # cells at tissue nodes only
    inside = (slice(y0, y1 + 1), slice(x0, x1 + 1))
    va = alone.V.getArray().reshape(y1 - y0 + 1, x1 - x0 + 1)
    vb = masked.V.getArray().reshape(BOX[1] + 1, BOX[0] + 1)
    assert va.max() > 0 and va.min() < -50                           # a wave, half-way across
    assert np.max(np.abs(vb[inside] - va)) < 1e-6                     # mV
    outside = np.ones(vb.shape, dtype=bool)
    outside[inside] = False
    assert np.allclose(vb[outside], vb[outside][0])                   # cells outside: at rest, all alike
    if equations == "bidomain":
        pa = alone.phi.getArray().reshape(va.shape)
        pb = masked.phi.getArray().reshape(vb.shape)
        assert np.ptp(pa) > 1.0                                       # mV: a real extracellular field
        assert np.max(np.abs(pb[inside] - pa)) < 1e-6
        assert np.all(pb[outside] == 0.0)


def test_masked_operator_is_the_rectangle_operator(petsc, tmp_path):
    """On the tissue rows the masked stiffness matrix is the rectangle's own, entry by entry; rows outside are
    empty; the mass is the rectangle's lumped mass."""
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.equations import Monodomain
    (x0, x1), (y0, y1) = RECT
    path = _labels(tmp_path, [RECT])
    big = _config("monodomain", (BOX[0] * H, BOX[1] * H), (0, 0), (H, H), tissue=f'label_file = "{path}"')
    small = _config("monodomain", ((x1 - x0) * H, (y1 - y0) * H), (0, 0), (H, H))
    kb, ks = (Monodomain(Grid(c), c, "box") for c in (big, small))
    nx = BOX[0] + 1
    tissue = [(y * nx + x) for y in range(y0, y1 + 1) for x in range(x0, x1 + 1)]
    Kb = kb.K.convert("dense").getDenseArray()
    Ks = ks.K.convert("dense").getDenseArray()
    assert np.array_equal(Kb[np.ix_(tissue, tissue)], Ks)
    rest = np.setdiff1d(np.arange(Kb.shape[0]), tissue)
    assert not np.any(Kb[rest]) and not np.any(Kb[:, rest])
    assert np.allclose(kb.M.getArray()[tissue], ks.M.getArray(), rtol=1e-14)
    assert not np.any(kb.M.getArray()[rest])


def test_pieces_have_their_own_constant(petsc, tmp_path):
    """Two rectangles that share no element: two pieces, an elliptic null space of two constants, and φe of zero
    mean over each piece; the piece not stimulated stays at rest."""
    path = _labels(tmp_path, [((1, 18), (1, 9)), ((21, 39), (1, 9))])  # nodes 19, 20 between them: no element
    sim = _run(_config("bidomain", (BOX[0] * H, BOX[1] * H), (0.0, 0.0), (3 * H, BOX[1] * H),
                       tissue=f'label_file = "{path}"'))
    mask = sim.grid.mask
    assert mask.n_pieces == 2
    assert sim.tissue.elliptic.A.getNullSpace().getVecs().__len__() == 2
    v = sim.V.getArray().reshape(BOX[1] + 1, BOX[0] + 1)
    phi = sim.phi.getArray().reshape(v.shape)
    M = sim.tissue.M.getArray().reshape(v.shape)
    assert v[:, 1:19].max() > 0                                       # the first piece fired
    assert v[:, 21:40].max() < -80                                    # the second did not
    for p in (1, 2):
        sel = mask.piece == p
        assert abs(np.sum(phi[sel] * M[sel])) < 1e-9 * np.sum(M[sel]) * max(1.0, np.ptp(phi))


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi), pytest.param(3, marks=pytest.mark.mpi)])
@pytest.mark.slow
def test_tissue_only_solves_equal_the_masked_box(tmp_path, ranks):
    """tissue.solve_on = "tissue" (the systems on the tissue nodes only: PETSc submatrices, GAMG) gives the masked
    box's run within the solver tolerance, with two pieces of tissue (a null-space constant each) on 1, 2 and 3
    ranks; the run's header says where it solved."""
    import h5py
    path = _labels(tmp_path, [((1, 18), (1, 9)), ((21, 39), (0, 6))])
    cfg = tmp_path / "masked.toml"
    cfg.write_text(SHEET.format(equations="bidomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[0.0, 0.0],
                                upper=[3 * H, BOX[1] * H], tissue=f'label_file = "{path.name}"')
                   + "[output]\ninterval = 1.0\n")
    out = {}
    for where in ("box", "tissue"):
        h5 = tmp_path / f"{where}.h5"
        proc = run_cli(["run", cfg, "--output", h5, "--set", f'tissue.solve_on="{where}"', "--",
                        "-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"], np=ranks)
        assert proc.returncode == 0, proc.stderr
        header = next(line for line in proc.stdout.splitlines() if "elliptic" in line)
        assert (f"tissue nodes of {(BOX[0] + 1) * (BOX[1] + 1):,}" in header) == (where == "tissue"), header
        with h5py.File(h5) as f:
            out[where] = (f["fields/Vm"][-1], f["fields/phi_e"][-1])
    (vb, pb), (vt, pt) = out["box"], out["tissue"]
    assert np.nanmax(vb) - np.nanmin(vb) > 50                         # a wave in the first piece
    assert np.array_equal(np.isnan(vb), np.isnan(vt))
    assert np.nanmax(np.abs(vb - vt)) < 1e-6                          # mV
    assert np.nanmax(np.abs(pb - pt)) < 1e-6 * max(1.0, np.nanmax(np.abs(pb)))


ELECTRODES = """
[ecg]
[[ecg.electrodes]]
name = "left"
position = [-0.2, 0.05, 0.0]
[[ecg.electrodes]]
name = "right"
position = [0.6, 0.05, 0.0]
[[ecg.electrodes]]
name = "above"
position = [0.2, 0.05, 0.3]
[[ecg.leads]]
name = "I"
plus = "right"
minus = "left"
"""


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
@pytest.mark.slow
def test_tissue_only_restart_is_bit_identical(tmp_path, ranks):
    """A masked bidomain run on the tissue rows (tissue.solve_on = "tissue": submatrices, GAMG), with two pieces
    (a null space of two vectors) and a pseudo-ECG, stopped at a checkpoint and restarted, writes the uninterrupted
    run's file bit for bit. It once did not (the ECG's last bits): PETSc's VecMDot chose its summation order from
    where the heap had put the vectors (-vec_mdot_use_gemv, cardiosim.api.REPRODUCIBLE), so each new process could
    sum the electrodes' dots (and those of a null space of several pieces) its own way."""
    import h5py
    path = _labels(tmp_path, [((1, 18), (1, 9)), ((21, 39), (0, 6))])
    cfg = tmp_path / "masked.toml"
    cfg.write_text(SHEET.format(equations="bidomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[0.0, 0.0],
                                upper=[3 * H, BOX[1] * H], tissue=f'label_file = "{path.name}"')
                   + "[output]\ninterval = 0.5\n" + ELECTRODES)
    where = ["--quiet", "--set", 'tissue.solve_on="tissue"']
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    run_cli(["run", cfg, "--output", whole, *where], np=ranks, check=True)
    run_cli(["run", cfg, "--output", part, *where, "--set", "simulation.duration=1.0",
             "--set", "checkpoint.interval=0.5"], np=ranks, check=True)
    run_cli(["run", cfg, "--output", part, *where, "--restart", tmp_path / "part.ckpt.h5"], np=ranks, check=True)

    def datasets(h5):
        out = {}
        with h5py.File(h5) as f:
            f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
        return out
    a, b = datasets(whole), datasets(part)
    assert sorted(a) == sorted(b) and "ecg/I" in a
    assert np.nanmax(a["fields/Vm"][-1]) - np.nanmin(a["fields/Vm"][-1]) > 50      # a wave in the first piece
    for name in a:
        assert np.array_equal(a[name], b[name], equal_nan=True), name


def test_tissue_only_with_the_stencil_solvers_is_one_line(tmp_path):
    """cardiosim's stencil solvers work on the whole grid: asked for on the tissue's rows, one line naming the key,
    exit 2, nothing written (it once crashed on PETSc's null DM); with solve_on = "auto" they, and PCMG asked for by
    option, get the box."""
    path = _labels(tmp_path, [RECT])
    cfg = tmp_path / "masked.toml"
    x0 = RECT[0][0]
    cfg.write_text(SHEET.format(equations="bidomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[x0 * H, 0.0],
                                upper=[(x0 + 2) * H, BOX[1] * H], tissue=f'label_file = "{path.name}"'))
    mg = ["-elliptic_pc_type", "python", "-elliptic_pc_python_type", "cardiosim.solvers.multigrid.StencilMG"]
    out = tmp_path / "out.h5"
    proc = run_cli(["run", cfg, "--output", out, "--set", 'tissue.solve_on="tissue"', "--", *mg])
    assert_one_line(proc, "stencil solvers on the tissue", ["-elliptic_", "no DMDA grid", 'tissue.solve_on = "box"'])
    assert not out.exists()
    for opts, name in ((mg, "StencilMG"), (["-elliptic_pc_type", "mg"], "cg+mg")):      # both need the grid
        proc = run_cli(["run", cfg, "--output", out, "--overwrite", "--set", "simulation.duration=0.1", "--set",
                        'tissue.solve_on="auto"', "--", *opts])
        assert proc.returncode == 0, proc.stderr
        assert name in proc.stdout and "tissue nodes of" not in proc.stdout, proc.stdout


def test_solve_on_auto_follows_the_tissue_share(petsc, tmp_path):
    """auto: the tissue's rows where it fills less than half the box, the box where it fills more."""
    from cardiosim.tissue.equations import solve_on_tissue
    small = _labels(tmp_path, [((4, 14), (2, 8))], name="small.npy")          # 11 x 7 of 41 x 11 nodes
    large = _labels(tmp_path, [((1, 39), (0, 10))], name="large.npy")         # 39 x 11 of them
    for path, want in ((small, True), (large, False)):
        cfg = _config("bidomain", (BOX[0] * H, BOX[1] * H), (0, 0), (H, H),
                      tissue=f'label_file = "{path}"\nsolve_on = "auto"')
        from petsc4py import PETSc
        from cardiosim.domain.grid import Grid
        grid = Grid(cfg, PETSc.COMM_SELF)
        assert solve_on_tissue(cfg, grid) is want
        grid.da.destroy()


@pytest.mark.mpi
@pytest.mark.slow
def test_masked_bidomain_on_two_ranks_equals_one_rank(tmp_path):
    """The mask (read whole, cut per rank) gives the same run on two ranks as on one; the grouped placement (the
    group's owner integrates the tissue cells of both ranks) gives the cpu placement's bit for bit."""
    import h5py
    path = _labels(tmp_path, [((2, 37), (1, 9)), ((3, 12), (0, 1))])
    cfg = tmp_path / "masked.toml"
    cfg.write_text(SHEET.format(equations="bidomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[0.0, 0.0],
                                upper=[4 * H, BOX[1] * H], tissue=f'label_file = "{path.name}"')
                   + "[output]\ninterval = 1.0\n")
    out = {}
    for np_, placement in ((1, "cpu"), (2, "cpu"), ("grouped", "grouped")):
        h5 = tmp_path / f"run{np_}.h5"
        proc = run_cli(["run", cfg, "--output", h5, "--quiet", "--set", f'cell.placement="{placement}"', "--",
                        "-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"],
                       np=2 if np_ == "grouped" else np_)
        assert proc.returncode == 0, proc.stderr
        with h5py.File(h5) as f:
            out[np_] = (f["fields/Vm"][-1], f["fields/phi_e"][-1])
    for a, b in zip(out[2], out["grouped"]):                           # the group's owner integrates its cells
        assert np.array_equal(a, b, equal_nan=True)
    for a, b in zip(out[1], out[2]):
        assert np.array_equal(np.isnan(a), np.isnan(b))               # NaN outside the tissue in the snapshots
        assert np.nanmax(np.abs(a - b)) < 1e-6
    assert np.isnan(out[1][0]).sum() == np.count_nonzero(np.load(path) == 0)
    assert np.nanmax(out[1][0]) - np.nanmin(out[1][0]) > 50


@pytest.mark.parametrize("case,labels,words", [
    ("wrong shape", lambda p: _labels(p, [RECT], shape=(5, 5)), ["tissue.label_file", "shape"]),
    ("negative label", lambda p: (np.save(p / "neg.npy", -np.ones((BOX[1] + 1, BOX[0] + 1))), p / "neg.npy")[1],
     ["tissue.label_file", "whole numbers >= 0"]),
    ("fractional label", lambda p: (np.save(p / "frac.npy", np.full((BOX[1] + 1, BOX[0] + 1), 0.5)),
                                    p / "frac.npy")[1], ["tissue.label_file", "whole numbers"]),
    ("no element", lambda p: _labels(p, [((3, 3), (0, 10))]), ["tissue.label_file", "no tissue"]),
    ("no file", lambda p: p / "missing.npy", ["tissue.label_file", "no such file"]),
])
def test_bad_label_file_is_one_line(tmp_path, case, labels, words):
    path = labels(tmp_path)
    cfg = tmp_path / "bad.toml"
    cfg.write_text(SHEET.format(equations="monodomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[0.0, 0.0],
                                upper=[H, H], tissue=f'label_file = "{path}"'))
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5"])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "bad.h5").exists()


def test_label_regions_select_stimulus_and_conductivity(petsc, tmp_path):
    """shape = 'label': a stimulus at the nodes of label 2 (the rectangle's left end) starts the same wave as the
    box stimulus there; a conductivity region of label 3 (the right half) with σ scaled by 0 blocks it."""
    (x0, x1), (y0, y1) = RECT
    lab = np.zeros((BOX[1] + 1, BOX[0] + 1), dtype=np.int16)
    lab[y0:y1 + 1, x0:x1 + 1] = 1
    lab[y0:y1 + 1, x0:x0 + 3] = 2
    np.save(tmp_path / "labels.npy", lab)
    tissue = f'label_file = "{tmp_path / "labels.npy"}"'
    size = (BOX[0] * H, BOX[1] * H)
    box = _run(_config("monodomain", size, (x0 * H, 0.0), ((x0 + 2) * H, BOX[1] * H), tissue=tissue))
    text = SHEET.format(equations="monodomain", size=list(size), h=H, lower=[0.0, 0.0], upper=[0.0, 0.0],
                        tissue=tissue)
    by_label = text.replace('shape = "box"\nlower = [0.0, 0.0]\nupper = [0.0, 0.0]', 'shape = "label"\nlabel = 2')
    a = _run(config.loads(by_label))
    assert np.array_equal(a.reaction.stimuli.amplitudes, box.reaction.stimuli.amplitudes)
    assert np.array_equal(a.V.getArray(), box.V.getArray())
    lab[y0:y1 + 1, 20:x1 + 1] = 3
    np.save(tmp_path / "labels.npy", lab)
    blocked = _run(config.loads(by_label.replace("[cell]", "[[tissue.regions]]\nshape = \"label\"\nlabel = 3\n"
                                                           "scale_intra = 0.0\nscale_extra = 0.0\n[cell]")))
    v = blocked.V.getArray().reshape(BOX[1] + 1, BOX[0] + 1)
    assert v[y0:y1 + 1, x0:x0 + 3].max() > 0                          # fired
    assert v[y0:y1 + 1, 22:x1 + 1].max() < -80                        # behind the scaled-to-zero region: at rest


@pytest.mark.parametrize("case,edit,words", [
    ("label absent", 'shape = "label"\nlabel = 7', ["stimulus[0].label", "no tissue node has label 7", "present: 1"]),
    ("label without label_file", None, ["stimulus[0].shape", "needs a label image"]),
    ("label and box keys", 'shape = "label"\nlabel = 1\nlower = [0.0, 0.0]', ["stimulus[0].lower", "label only"]),
])
def test_bad_label_region_is_one_line(tmp_path, case, edit, words):
    path = _labels(tmp_path, [RECT])
    text = SHEET.format(equations="monodomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[0.0, 0.0],
                        upper=[H, H], tissue=f'label_file = "{path}"' if edit else "")
    stim = 'shape = "box"\nlower = [0.0, 0.0]\nupper = [0.01, 0.01]'
    assert stim in text
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text.replace(stim, edit or 'shape = "label"\nlabel = 1'))
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5"])
    assert_one_line(proc, case, words)


@pytest.mark.slow
def test_manufactured_solution_on_a_disc(petsc, tmp_path, monkeypatch, capsys):
    """Pathmanathan & Gray's manufactured solution (tests/test_convergence.py) with F(x) = J0(k|x − c|) on a disc
    of radius R = 0.45 cm, k R the first zero of J0' so that F has zero normal derivative on the circle, and
    σ = 5.9/k² (∇·σ∇F = −5.9 F, the 2D cos(πx)cos(2πy)'s eigenvalue, so the cell model is unchanged). The disc is
    a staircase of grid elements: the error of V falls as h, not h² (measured: orders 0.86, 1.00, 0.97, 1.11 from
    h = 0.05 to 0.003125 cm); the box of the same equations gives h² (test_convergence.py)."""
    import math
    from scipy.special import j0
    from cardiosim.cells import pathmanathan_gray as pg
    from cardiosim.simulation.loop import Simulation
    R, c, kR = 0.45, 0.5, 3.8317059702075125
    k = kR / R
    s = 5.9 / k ** 2
    monkeypatch.setattr(pg, "F", lambda x: j0(k * np.hypot(x[:, 0] - c, x[:, 1] - c)))
    errors = []
    for level in (1, 2, 3, 4):
        h = 0.1 / 2 ** level
        n = round(1 / h)
        y, x = np.mgrid[0:n + 1, 0:n + 1] * h
        np.save(tmp_path / f"disc{level}.npy", (np.hypot(x - c, y - c) <= R).astype(np.int8))
        cfg = config.loads(f"""
[simulation]
equations = "monodomain"
duration = 1.0
dt = {10 * h * h!r}
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [1.0, 1.0]
spacing = {h!r}
[tissue]
chi = 3.0
Cm = 2.0
sigma_il = {2 * s!r}
sigma_it = {2 * s!r}
sigma_el = {2 * s!r}
sigma_et = {2 * s!r}
label_file = "{tmp_path / f'disc{level}.npy'}"
[cell]
model = "pathmanathan-gray"
parameters = {{ beta = -5.9 }}
""")
        sim = Simulation(cfg, write_output=False)
        xy, M = sim.grid.coords(), sim.tissue.M.getArray()
        err = [0.0]

        def record(sm):
            e = sm.V.getArray() - pg.exact(xy, sm.t)["V"]
            err[0] = max(err[0], math.sqrt(float(np.sum(M * e * e))))   # L∞(0,T; L2(tissue))

        sim.run(on_step=record)
        errors.append(err[0])
    orders = [math.log2(a / b) for a, b in zip(errors, errors[1:])]
    with capsys.disabled():
        print(f"\ndisc, h = 0.05 ... 0.00625 cm: errors {['%.3g' % e for e in errors]}, orders "
              f"{['%.2f' % o for o in orders]}")
    assert all(0.8 < o < 1.5 for o in orders[1:])


def test_native_cells_on_a_mask_equal_numpy(petsc, tmp_path):
    """TT06 on the masked rectangle: the compiled C kernel, given the tissue cells only, equals the NumPy model."""
    path = _labels(tmp_path, [RECT])
    runs = {}
    for backend in ("numpy", "native"):
        text = SHEET.format(equations="monodomain", size=[BOX[0] * H, BOX[1] * H], h=H, lower=[RECT[0][0] * H, 0.0],
                            upper=[(RECT[0][0] + 2) * H, BOX[1] * H], tissue=f'label_file = "{path}"')
        text = text.replace('model = "mitchell-schaeffer"',
                            f'model = "tt06"\nbackend = "{backend}"\nintegrator = "rush-larsen"')
        runs[backend] = _run(config.loads(text.replace("current_density = -150.0", "current_density = -52.0")))
    a, b = runs["numpy"].V.getArray(), runs["native"].V.getArray()
    assert a.max() > 0 and np.max(np.abs(a - b)) < 1e-8


# -- an anatomy in small: a masked sheet with two labels, a cell region, probes and a pseudo-ECG -----------------
# The tissue is the left 15 of the box's 33 node columns, so that on two ranks (split along x) the second rank has
# no tissue and no cell at all; label 2 (the upper right of the tissue) holds cells with endocardial I_to and
# M-cell I_Ks (cell.regions).
ANATOMY = """
[simulation]
equations = "bidomain"
duration = {duration}
dt = 0.02
ode_substeps = 10
progress_interval = 0
[grid]
size = [0.4, 0.2]
spacing = 0.0125
[tissue]
fibre_angle = 30.0
label_file = "labels.npy"
[cell]
model = "tt06"
[[cell.regions]]
shape = "label"
label = 2
parameters = {{g_Ks = 0.098, g_to = 0.073}}
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, 0.2]
duration = 1.0
current_density = -52.0
[[probe]]
name = "m_cells"
position = [0.15, 0.15]
[[probe]]
name = "base"
position = [0.1, 0.05]
[ecg]
[[ecg.electrodes]]
name = "right"
position = [0.3, 0.1]
[[ecg.electrodes]]
name = "above"
position = [0.1, 0.1, 0.5]
[[ecg.electrodes]]
name = "left"
position = [-0.2, 0.1]
[[ecg.leads]]
name = "I"
plus = "right"
minus = "left"
[[ecg.leads]]
name = "II"
weights = {{above = 1.0, left = -0.5, right = -0.5}}
[output]
interval = 1.0
"""


def anatomy(tmp_path, duration=6.0):
    """The anatomy's config (and its label image beside it)."""
    lab = np.zeros((17, 33), dtype=np.int16)
    lab[:, :15] = 1
    lab[8:, 8:15] = 2
    np.save(tmp_path / "labels.npy", lab)
    cfg = tmp_path / "anatomy.toml"
    cfg.write_text(ANATOMY.format(duration=duration))
    return cfg


def anatomy_results(path) -> dict:
    """Everything a run of the anatomy writes that placements must agree on."""
    import h5py
    with h5py.File(path) as f:
        d = {"Vm": f["fields/Vm"][:], "phi_e": f["fields/phi_e"][:], "activation": f["maps/activation_time"][:]}
        for name in ("m_cells", "base"):
            d[f"probe {name}"] = f["probes"][name]["Vm"][:]
        for name in f["ecg"]:
            d[f"ecg {name}"] = f["ecg"][name][:]
    return d


def assert_anatomy_agrees(a: dict, b: dict, tol: float, label: str = "") -> None:
    for key in a:
        x, y = a[key], b[key]
        assert np.array_equal(np.isnan(x), np.isnan(y)), key
        d = float(np.nanmax(np.abs(x - y)))
        print(f"  {label} {key:<16} max |difference| = {d:.3g}")
        assert d < tol, key


@pytest.mark.mpi
@pytest.mark.slow
def test_anatomy_pieces_on_two_ranks_and_grouped(tmp_path):
    """Cells in pieces (the mask, a cell region) on two ranks, one with no tissue: the cpu and grouped placements
    (a CPU owner integrating both ranks' cells, piece by piece) give one rank's run; the M-like cells of label 2
    differ from a run without the region there, and far less elsewhere (the region's parameters take effect)."""
    cfg = anatomy(tmp_path, duration=20.0)
    plain = tmp_path / "plain.toml"
    plain.write_text(re.sub(r'\[\[cell.regions\]\][^[]*', "", cfg.read_text()))
    tight = ["--", "-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
    out = {}
    for tag, np_, placement in (("one", 1, "cpu"), ("two", 2, "cpu"), ("grouped", 2, "grouped"), ("plain", 1, "cpu")):
        h5 = tmp_path / f"{tag}.h5"
        proc = run_cli(["run", plain if tag == "plain" else cfg, "--output", h5, "--quiet", "--set",
                        'cell.backend="numpy"', "--set", f'cell.placement="{placement}"', *tight], np=np_)
        assert proc.returncode == 0, proc.stderr
        out[tag] = anatomy_results(h5)
    assert_anatomy_agrees(out["two"], out["grouped"], 1e-12, "grouped vs cpu, 2 ranks")
    assert_anatomy_agrees(out["one"], out["two"], 1e-6, "2 ranks vs 1")
    a = out["one"]
    assert np.nanmax(a["activation"]) > 0 and np.isnan(a["activation"][:, 20:]).all()   # tissue fired, box not
    p = out["plain"]
    assert a["probe m_cells"].max() > 0 and a["probe base"].max() > 0
    in_region = np.max(np.abs(a["probe m_cells"] - p["probe m_cells"]))
    away = np.max(np.abs(a["probe base"] - p["probe base"]))
    print(f"  region's effect on Vm: {in_region:.3g} mV in it, {away:.3g} mV away from it")
    assert in_region > 5.0 and away < in_region / 2
    assert np.ptp(a["ecg I"]) > 0 and np.allclose(a["ecg I"], a["ecg right"] - a["ecg left"])
    assert np.allclose(a["ecg II"], a["ecg above"] - 0.5 * (a["ecg left"] + a["ecg right"]))


def test_cell_region_over_all_tissue_equals_cell_parameters(petsc, tmp_path):
    """A cell region that holds every tissue node gives the run with its parameters as cell.parameters, bit for bit:
    a piece is integrated like the whole."""
    cfg = anatomy(tmp_path, duration=2.0)
    text = cfg.read_text()
    region = '[[cell.regions]]\nshape = "label"\nlabel = 2\nparameters = {g_Ks = 0.098, g_to = 0.073}\n'
    assert region in text
    every = config.loads(text.replace(region, region.replace("label = 2", "label = 1") + region), path=cfg)
    plain = config.loads(text.replace(region, "parameters = {g_Ks = 0.098, g_to = 0.073}\n"), path=cfg)
    for c in (every, plain):
        c.cell.backend = "numpy"
    a, b = _run(every), _run(plain)
    assert len(a.reaction.backend.pieces) == 3 and len(b.reaction.backend.pieces) == 1
    assert np.array_equal(a.V.getArray(), b.V.getArray())


@pytest.mark.parametrize("case,region,words", [
    ("unknown parameter", "label = 2\nparameters = {g_nope = 1.0}",
     ["cell.regions[0].parameters.g_nope", "no parameter"]),
    ("unknown variant", 'label = 2\nvariant = "septal"', ["cell.regions[0].variant", "not a variant", "endo"]),
    ("label absent", "label = 7", ["cell.regions[0].label", "no tissue node has label 7"]),
])
def test_bad_cell_region_is_one_line(tmp_path, case, region, words):
    cfg = anatomy(tmp_path)
    text = cfg.read_text()
    old = "label = 2\nparameters = {g_Ks = 0.098, g_to = 0.073}"
    assert old in text
    cfg.write_text(text.replace(old, region))
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5"])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "bad.h5").exists()
