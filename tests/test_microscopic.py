"""The microscopic tissue model (docs/user/microscopic.md): the layout generator, the face operator, and the checks of
reference §5 — reduction to the homogeneous operator, homogenisation, saltatory conduction and block — on
one-row strips of Mitchell–Schaeffer cells (Bondarenko numbers: `cardiosim bench microscopic --model
bondarenko`, in docs/user/microscopic.md)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from cardiosim import config

SHEET = """
[simulation]
equations = "{equations}"
duration = {duration}
dt = 0.01
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [{lx}, {ly}]
spacing = 0.0008
[tissue]
model = "microscopic"
[tissue.microscopic]
{micro}
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.0096, {ly}]
duration = 2.0
current_density = -200.0
"""


def sheet(nx=48, ny=8, micro="", equations="monodomain", duration=1.0):
    return config.loads(SHEET.format(lx=round(nx * 0.0008, 10), ly=round(ny * 0.0008, 10), micro=micro,
                                     equations=equations, duration=duration))


def layout(cfg):
    from cardiosim.domain.grid import node_counts
    from cardiosim.tissue.microscopic import Layout
    n = node_counts(cfg)
    return Layout(cfg, n, cfg.grid.spacing), [(0, int(v)) for v in n]


# -- the layout generator ------------------------------------------------------------------------------------------
def test_default_layout_follows_the_rule():
    """Brick wall of 12 × 2 volumes shifted by 6 per row: x faces are cytoplasm inside a myocyte and plicate at its
    ends; y faces are cytoplasm inside a row, and between rows interplicate within one volume of a myocyte end
    (of either row), combined elsewhere: 4 and 8 per 12."""
    from cardiosim.tissue import microscopic as mic
    lay, full = layout(sheet())
    cid, _, dead = lay.cells(full)
    (kx, gx), (ky, gy) = lay.faces(full)
    assert not dead.any()
    for j in range(8):
        s = (j // 2) * 6 % 12
        ends = [i for i in range(47) if (i + 1 + s) % 12 == 0]
        assert list(np.nonzero(kx[j, :-1] == mic.PLICATE)[0]) == ends
        assert np.all(kx[j, :-1][np.setdiff1d(np.arange(47), ends)] == mic.CYTOPLASM)
        assert kx[j, -1] == mic.BOUNDARY
        assert len(np.unique(cid[j])) == len(ends) + 1
    for j in range(7):
        if j % 2 == 0:
            assert np.all(ky[j] == mic.CYTOPLASM)
        else:
            assert np.sum(ky[j] == mic.INTERPLICATE) == 16 and np.sum(ky[j] == mic.COMBINED) == 32
            mean = gy[j].mean()
            assert mean == pytest.approx((4 * 0.33 + 8 * 0.062) / 12)          # 0.151 µS (reference §3.2)
    assert np.all(ky[7] == mic.BOUNDARY)
    assert np.all(gx[kx == mic.CYTOPLASM] == pytest.approx(3.2))               # σ_c·d = 0.4 µS/µm × 8 µm
    assert np.all(gx[kx == mic.PLICATE] == 0.5)


def test_series_junctions():
    from cardiosim.tissue import microscopic as mic
    lay, full = layout(sheet(micro='junction_treatment = "series"'))
    (kx, gx), (ky, gy) = lay.faces(full)
    assert gx[kx == mic.PLICATE] == pytest.approx(0.4324, abs=1e-4)            # 1/(1/0.5 + 1/3.2)
    assert gy[ky == mic.INTERPLICATE] == pytest.approx(0.2992, abs=1e-4)
    assert gy[ky == mic.COMBINED] == pytest.approx(0.06082, abs=1e-5)


RANDOM = """random_offset = true
seed = 7
junction.noise_cv = 0.4
junction.dropout = 0.2
fibrosis.fraction = 0.15"""


def test_layout_of_any_box_is_the_whole_layout_cut():
    """Every draw is a hash of (seed, global index): the faces of any box of volumes (a rank's) are the whole
    grid's, cut to the box — the layout cannot depend on the number of ranks."""
    lay, full = layout(sheet(nx=60, ny=20, micro=RANDOM))
    whole = lay.faces(full)
    cid = lay.cells(full)[0]
    for box in ([(0, 17), (0, 9)], [(17, 60), (9, 20)], [(31, 32), (5, 6)], [(5, 60), (0, 20)]):
        part = lay.faces(box)
        sl = tuple(slice(a, b) for a, b in reversed(box))
        assert np.array_equal(lay.cells(box)[0], cid[sl])
        for (k, g), (kw, gw) in zip(part, whole):
            assert np.array_equal(k, kw[sl]) and np.array_equal(g, gw[sl])
    (kx, gx), (ky, gy) = whole
    from cardiosim.tissue import microscopic as mic
    j = (kx >= mic.PLICATE) & (kx <= mic.COMBINED)
    assert np.std(gx[j]) > 0.1                                                   # the noise is there
    assert np.any(kx == mic.NO_JUNCTION) and np.any(kx == mic.NON_CONDUCTING)
    other = layout(sheet(nx=60, ny=20, micro=RANDOM.replace("seed = 7", "seed = 8")))[0].faces(full)
    assert not np.array_equal(other[0][1], gx)                                   # the seed matters


def test_noise_has_mean_one_and_the_cv_asked_for():
    from cardiosim.tissue.microscopic import lognormal_factor, uniform
    f = lognormal_factor(3, 0, np.arange(200000), 0.5)
    assert f.mean() == pytest.approx(1.0, abs=0.01)
    assert f.std() / f.mean() == pytest.approx(0.5, abs=0.02)
    u = uniform(3, 1, np.arange(100000))
    assert 0 <= u.min() and u.max() < 1 and u.mean() == pytest.approx(0.5, abs=0.01)


def test_layout_file_gives_the_same_faces(tmp_path):
    """A layout written out (cell ids + face types) and read back as layout_file is the same layout."""
    from cardiosim.domain.grid import node_counts
    from cardiosim.tissue.microscopic import Layout
    cfg = sheet(nx=36, ny=10, micro="random_offset = true\nseed = 3\nfibrosis.fraction = 0.2")
    lay, full = layout(cfg)
    cid, _, dead = lay.cells(full)
    (kx, gx), (ky, gy) = lay.faces(full)
    np.savez(tmp_path / "cells.npz", cell_id=np.where(dead, -1 - cid, cid))
    cfg2 = sheet(nx=36, ny=10, micro=f'layout_file = "{tmp_path / "cells.npz"}"')
    n = node_counts(cfg2)
    (kx2, gx2), (ky2, gy2) = Layout(cfg2, n, cfg2.grid.spacing).faces(full)
    # The rule applied to the ids. A file has no myocyte positions, so a volume is in the disc zone when another
    # myocyte is near along x: at the sheet's left and right edges the generated rule (from p) may differ.
    assert np.array_equal(kx, kx2) and np.array_equal(gx, gx2)
    assert np.array_equal(ky[:, 1:-1], ky2[:, 1:-1]) and np.array_equal(gy[:, 1:-1], gy2[:, 1:-1])
    np.savez(tmp_path / "typed.npz", cell_id=cid, face_x=kx, face_y=ky)
    cfg3 = sheet(nx=36, ny=10, micro=f'layout_file = "{tmp_path / "typed.npz"}"')
    (kx3, _), (ky3, _) = Layout(cfg3, n, cfg3.grid.spacing).faces(full)
    assert np.array_equal(kx3, kx) and np.array_equal(ky3, ky)                  # face types as given


# -- the operator --------------------------------------------------------------------------------------------------
def _dense(A):
    ai, aj, av = A.getValuesCSR()
    out = np.zeros(A.getSize())
    for r in range(len(ai) - 1):
        out[r, aj[ai[r]:ai[r + 1]]] = av[ai[r]:ai[r + 1]]
    return out


def test_operator_is_a_symmetric_m_matrix(petsc):
    """The parabolic matrix αM + K: symmetric, off-diagonals ≤ 0, strictly diagonally dominant (so SPD), on a
    layout with noise, dropout and fibrosis; a 5-point pattern."""
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(sheet(nx=30, ny=12, micro=RANDOM), write_output=False)
    A = _dense(sim.tissue.parabolic.A)
    assert np.allclose(A, A.T, rtol=0, atol=1e-14)
    off = A - np.diag(np.diag(A))
    assert off.max() <= 0
    alpha_m = 1400.0 / 0.01 * 0.0008 ** 2
    assert np.all(np.diag(A) + off.sum(axis=1) == pytest.approx(alpha_m, rel=1e-12))   # zero-flux rows
    assert max(np.count_nonzero(r) for r in A) <= 5


def test_reduction_to_the_star_operator(petsc):
    """§5d: with every face at σ_c·d the matrix equals cardiosim's star αM + K (θ = 1) for σ = 4 mS/cm on every
    interior row; an edge row has the full volume h² and three neighbours (the vertex-centred grid: h²/2, ½σ)."""
    from cardiosim.simulation.loop import Simulation
    micro = "G_p = 3.2\nG_i = 3.2\nG_c = 3.2"
    sim = Simulation(sheet(nx=14, ny=10, micro=micro), write_output=False)
    hom = config.loads(SHEET.format(lx=13 * 0.0008, ly=round(9 * 0.0008, 10), micro="", equations="monodomain",
                                    duration=1.0).replace('model = "microscopic"',
                                                          "sigma_il = 4.0\nsigma_it = 4.0\nsigma_el = 1e15\n"
                                                          "sigma_et = 1e15"))
    ref = Simulation(hom, write_output=False)
    assert ref.stencil == "star" and list(ref.grid.n) == list(sim.grid.n)
    A, B = _dense(sim.tissue.parabolic.A), _dense(ref.tissue.parabolic.A)
    ny, nx = 10, 14
    interior = [j * nx + i for j in range(1, ny - 1) for i in range(1, nx - 1)]
    assert np.allclose(A[interior], B[interior], rtol=1e-12, atol=1e-12 * np.abs(B).max())
    alpha_h2 = 1400.0 / 0.01 * 0.0008 ** 2
    row = 0 * nx + 5                                                 # on the y = 0 edge
    assert A[row, row] == pytest.approx(alpha_h2 + 3 * 4.0)
    assert sorted(A[row][A[row] < 0]) == pytest.approx([-4.0] * 3)
    assert B[row, row] == pytest.approx(alpha_h2 / 2 + 2 * 4.0)


def _run(cfg, petsc=None):
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(cfg, write_output=False)
    while sim.step_index < sim.n_steps:
        sim.step()
    return sim


def test_reduction_run_equals_the_homogeneous_run(petsc):
    """§5d: uniform faces σ_c·d and cardiosim's homogeneous model with σ = 4 mS/cm, same nodes, a wave started in
    the middle: V agrees to solver tolerance away from the boundary (where the two grids differ by construction)."""
    from cardiosim.bench.microscopic import strip_config
    # 1.2 mm either side of the stimulus: in 3 ms (sqrt(D t) ≈ 0.9 mm at D = σ/χCm) nothing of the wave's
    # electrotonic spread reaches the ends and comes back to the compared stretch.
    n, mid = 2400, 1200
    kw = dict(G=3.2, n=n, duration=3.0, model="mitchell-schaeffer")
    micro = strip_config(**kw)
    hom = strip_config(homogeneous_sigma=4.0, **kw)
    for c, off in ((micro, 0.5), (hom, 0.0)):
        st = c.stimulus[0]
        st.lower, st.upper = [(mid - 20 + off) * 0.0008 - 1e-9], [(mid + 19 + off) * 0.0008 + 1e-9]
        st.current_density = -400.0
    a, b = _run(micro), _run(hom)
    assert np.count_nonzero(a.reaction.stimuli.amplitudes) == np.count_nonzero(b.reaction.stimuli.amplitudes) == 40
    va, vb = a.V.getArray(), b.V.getArray()
    assert va[mid] > 0                                                # the middle has fired
    assert np.max(np.abs(va[1000:1400] - vb[1000:1400])) < 1e-6      # mV
    assert np.max(np.abs(va - vb)) > 0                                # the boundary rows do differ


def test_layout_does_not_matter_when_every_face_is_the_same(petsc):
    """§5d: changing the layout while every face stays σ_c·d leaves V bit-identical."""
    same = "G_p = 3.2\nG_i = 3.2\nG_c = 3.2\n"
    runs = [_run(sheet(nx=36, ny=8, micro=same + m, duration=3.0)).V.getArray().copy()
            for m in ("row_offset = 0", "row_offset = 5\ncell_length = 7", "random_offset = true\nseed = 4")]
    assert runs[0][-1] != runs[0][0]
    for r in runs[1:]:
        assert np.array_equal(r, runs[0])


def test_bidomain_tends_to_the_monodomain(petsc):
    """The bidomain variant with σ_e × 1e4 gives the monodomain's V (reference §1.5)."""
    micro = ""
    mono = _run(sheet(nx=60, ny=4, micro=micro, duration=3.0))
    cfg = sheet(nx=60, ny=4, micro=micro, duration=3.0, equations="bidomain")
    cfg.tissue.sigma_el *= 1e4
    cfg.tissue.sigma_et *= 1e4
    bi = _run(cfg)
    vm, vb = mono.V.getArray(), bi.V.getArray()
    assert np.max(vm) > 0
    assert np.max(np.abs(vm - vb)) < 0.05                              # mV
    assert np.all(np.isfinite(bi.phi.getArray()))


# -- reference §5a–c -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_homogenisation(petsc, capsys):
    """§5a: myocytes of n_l volumes with the junction that keeps σ_eff: a one-volume myocyte is the homogeneous
    strip exactly; the gap grows monotonically with n_l; CV_hom scales as sqrt(σ)."""
    from cardiosim.bench.microscopic import homogenisation
    r = homogenisation()
    with capsys.disabled():
        print(f"\n§5a (Mitchell–Schaeffer, direct, d = 8 µm): σ_eff = {r['sigma_eff_uS_per_um']:.4f} µS/µm, "
              f"CV_hom = {r['cv_hom']:.5f} cm/ms; CV_hom/CV(σ_c) = {r['cv_ratio']:.4f}, "
              f"sqrt(σ_eff/σ_c) = {r['sqrt_ratio']:.4f}")
        for row in r["rows"]:
            print(f"  n_l = {row['n_l']:2d}  G = {row['G_uS']:.4f} µS  CV = {row['cv_cm_per_ms']:.5f} cm/ms  "
                  f"CV/CV_hom − 1 = {row['rel']:+.3e}")
    assert r["sigma_eff_uS_per_um"] == pytest.approx(96 / 348)                 # 0.2759 µS/µm
    assert r["cv_ratio"] == pytest.approx(r["sqrt_ratio"], rel=0.01)
    rows = r["rows"]
    assert [row["G_uS"] for row in rows] == pytest.approx([2.207, 1.684, 1.362, 1.143, 0.865, 0.500], abs=1e-3)
    assert rows[0]["rel"] == pytest.approx(0.0, abs=1e-9) and rows[0]["max_dt_vs_hom_ms"] < 1e-9
    gaps = [abs(row["rel"]) for row in rows]
    assert all(a < b for a, b in zip(gaps, gaps[1:]))
    # and at fixed n_l = 12 the gap shrinks as G approaches σ_c·d = 3.2 µS (a uniform strip)
    fixed = [abs(homogenisation(lengths=(12,), G=G)["rows"][0]["rel"]) for G in (0.25, 1.0, 3.2)]
    assert fixed[0] > fixed[1] > fixed[2] and fixed[2] < 1e-9


def test_saltatory_conduction(petsc, capsys):
    """§5b: activation rises little inside a myocyte and jumps at its end face; the junction delay over the
    per-face intracellular delay, r_s, exceeds 1 and grows as G_p falls."""
    from cardiosim.bench.microscopic import measure_points, run_strip, saltatory
    rows = saltatory()
    with capsys.disabled():
        print("\n§5b (Mitchell–Schaeffer, n_l = 12): G_p (µS), τ_cell, τ_j (ms), r_s, CV (cm/ms)")
        for r in rows:
            print(f"  {r['G_uS']:.3f}  {r['tau_cell_ms']:.4f}  {r['tau_j_ms']:.4f}  {r['r_s']:6.2f}  {r['cv']:.5f}")
    rs = [r["r_s"] for r in rows]
    assert rs[0] > 1 and all(a < b for a, b in zip(rs, rs[1:]))
    assert rs[0] == pytest.approx(6.4, rel=0.25)                      # of order σ_c·d / G_p (reference §5b)
    for r in rows:
        assert r["cv_staircase"] == pytest.approx(r["cv"], rel=1e-9)
    # the staircase itself: in every myocyte of the measured stretch each inner face's delay is below the
    # junction's
    t = run_strip(G=0.5)
    a, b = measure_points(12, len(t), 2500.0)
    d = np.diff(t[a:b + 1])
    ends = np.arange(11, b - a, 12)
    inner = np.setdiff1d(np.arange(len(d)), ends)
    assert d[ends].min() > 2 * d[inner].max()


def test_lower_junction_conductance_slows_then_blocks(petsc):
    """§5c: CV falls monotonically as G_p falls; at a tiny G_p the front stops (the last 10 myocytes never
    activate, and nothing moves in the last 10 ms)."""
    from cardiosim.bench.microscopic import blocked, run_strip, velocity
    cvs = [velocity(run_strip(G=G), 12) for G in (0.5, 0.2, 0.1, 0.05)]
    assert all(a > b for a, b in zip(cvs, cvs[1:]))
    t = run_strip(G=1e-6, n=240, duration=20.0)
    assert blocked(t) and np.isfinite(t[:12]).all()


@pytest.mark.slow
def test_block_threshold_by_bisection(petsc, capsys):
    """§5c: G* by bisection to 2 % (about 25 s); CV just above it is far below the default's. (Mitchell–Schaeffer
    blocks only at tiny G_p: its threshold is ~5 mV above rest and its action potential lasts hundreds of ms.) A
    front still advancing after 400 ms counts as conducting."""
    from cardiosim.bench.microscopic import block_threshold, blocked, run_strip
    r = block_threshold(n=240)
    with capsys.disabled():
        print(f"\n§5c (Mitchell–Schaeffer, 240 volumes): G* = {r['G_star_uS']:.4g} µS, blocks at "
              f"{r['blocks_at_uS']:.4g} µS, CV just above {r['cv_above_cm_per_ms']:.4g} cm/ms ({r['runs']} runs)")
    assert (r["G_star_uS"] - r["blocks_at_uS"]) <= 0.02 * r["G_star_uS"]
    assert 0 < r["cv_above_cm_per_ms"] < 0.1 * 0.04783                 # far below the default's CV
    assert blocked(run_strip(G=r["blocks_at_uS"], n=240))
    assert not blocked(run_strip(G=r["G_star_uS"], n=240))


@pytest.mark.slow
def test_block_threshold_treatments_depths_and_step(petsc, capsys):
    """§5c report: G* for both junction treatments at d = 8 and 16 µm (a deeper sheet blocks at a larger G_p, its
    cytoplasm conducting more), and G* moving by < 5 % when Δt_p is halved (Mitchell–Schaeffer runs one ODE step
    per PDE step, so Δt_o halves with it; about 3 minutes)."""
    from cardiosim.bench.microscopic import block_threshold
    found = {}
    for treatment in ("direct", "series"):
        for depth in (8.0, 16.0):
            found[treatment, depth] = block_threshold(n=240, treatment=treatment, depth=depth)
    half = block_threshold(n=240, dt=0.005)
    with capsys.disabled():
        print("\n§5c (Mitchell–Schaeffer, 240 volumes): junctions, d (µm), G* (µS), CV just above (cm/ms)")
        for (treatment, depth), r in found.items():
            print(f"  {treatment:<7} {depth:4.0f}  {r['G_star_uS']:.4g}  {r['cv_above_cm_per_ms']:.4g}")
        print(f"  direct     8  (Δt_p = 0.005 ms)  {half['G_star_uS']:.4g}")
    base = found["direct", 8.0]["G_star_uS"]
    assert abs(half["G_star_uS"] / base - 1) < 0.05
    assert found["direct", 16.0]["G_star_uS"] > base


def test_three_dimensional_sheet(petsc):
    """3D: myocytes cell_width tall in z too, a 7-point M-matrix, and a wave that crosses the block."""
    from cardiosim.simulation.loop import Simulation
    text = SHEET.format(lx=round(36 * 0.0008, 10), ly=round(4 * 0.0008, 10), micro="seed = 2",
                        equations="bidomain", duration=4.0)
    text = text.replace(f"size = [{round(36 * 0.0008, 10)}, {round(4 * 0.0008, 10)}]",
                        f"size = [{round(36 * 0.0008, 10)}, {round(4 * 0.0008, 10)}, {round(4 * 0.0008, 10)}]")
    text = text.replace("lower = [0.0, 0.0]", "lower = [0.0, 0.0, 0.0]").replace(
        f"upper = [0.0096, {round(4 * 0.0008, 10)}]", "upper = [0.0096, 0.0032, 0.0032]")
    cfg = config.loads(text)
    sim = Simulation(cfg, write_output=False)
    A = _dense(sim.tissue.parabolic.A)
    off = A - np.diag(np.diag(A))
    assert np.allclose(A, A.T) and off.max() <= 0 and max(np.count_nonzero(r) for r in A) == 7
    (kx, _), (ky, _), (kz, _) = sim.tissue.faces
    from cardiosim.tissue import microscopic as mic
    assert np.any(kz == mic.CYTOPLASM) and np.any((kz >= mic.INTERPLICATE) & (kz <= mic.COMBINED))
    while sim.step_index < sim.n_steps:
        sim.step()
    assert np.isfinite(sim.activation.time).sum() > 0.5 * sim.grid.n_nodes


@pytest.mark.slow
def test_brick_wall_plane_wave_is_faster_than_one_row(petsc, capsys):
    """§5a/§5c on the 2D default layout (brick wall, p/i/c junctions), a plane wave along x: CV falls with G_p, and
    is at least the one-row strip's (with a brick offset the per-row value is a lower bound on σ_eff,l: lateral
    paths only add conductance). About 20 s."""
    from cardiosim.bench.microscopic import measure_points, run_strip, velocity
    n, ny = 1200, 4
    out = []
    for G in (0.5, 0.1):
        cfg = sheet(nx=n, ny=ny, micro=f"G_p = {G}", duration=40.0)
        sim = _run(cfg)
        t = sim.activation.time.reshape(ny, n)
        a, b = measure_points(12, n, 2500.0)
        cv2 = (b - a) * 0.0008 / (t[:, b] - t[:, a])
        cv1 = velocity(run_strip(G=G), 12)
        out.append((G, cv2.min(), cv2.max(), cv1))
    with capsys.disabled():
        for G, lo, hi, cv1 in out:
            print(f"\nbrick wall, 4 rows, G_p = {G} µS: CV {lo:.5f}–{hi:.5f} cm/ms; one row: {cv1:.5f} cm/ms", end="")
        print()
    for G, lo, hi, cv1 in out:
        assert lo >= cv1 and (hi - lo) < 1e-3 * hi                      # a plane wave, faster than one row
    assert out[1][2] < out[0][1]


def test_junction_regions_scale_their_faces():
    """[[tissue.microscopic.regions]]: a box halving G_p and zeroing G_c acts on the junction faces whose centre
    lies inside, and on nothing else."""
    from cardiosim.tissue import microscopic as mic
    box = ('[[tissue.microscopic.regions]]\nshape = "box"\nlower = [0.0, 0.0]\nupper = [0.0192, 0.0064]\n'
           "scale_p = 0.5\nscale_c = 0.0\n")
    base, full = layout(sheet())
    cfg = config.loads(SHEET.format(lx=round(48 * 0.0008, 10), ly=round(8 * 0.0008, 10), micro="",
                                    equations="monodomain", duration=1.0) + box.replace("[[tissue.", "[[tissue."))
    lay = layout(cfg)[0]
    (kx0, gx0), (ky0, gy0) = base.faces(full)
    (kx, gx), (ky, gy) = lay.faces(full)
    xc = (np.arange(48) + 1.0) * 0.0008                       # x faces' centres
    inside = xc[None, :] <= 0.0192 + 1e-12
    assert np.all(gx[(kx == mic.PLICATE) & inside] == 0.25)
    assert np.all(gx[(kx == mic.PLICATE) & ~inside] == 0.5)
    assert np.array_equal(gx[kx == mic.CYTOPLASM], gx0[kx0 == mic.CYTOPLASM])
    assert np.all(gy[ky == mic.COMBINED][np.broadcast_to((np.arange(48) + 0.5)[None] * 0.0008 <= 0.0192,
                                                         ky.shape)[ky == mic.COMBINED]] == 0.0)
    assert np.array_equal(gy[ky == mic.INTERPLICATE], gy0[ky0 == mic.INTERPLICATE])


OTHER_MODELS = """
[simulation]
equations = "monodomain"
duration = 10.0
dt = 0.01
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [0.192]
spacing = 0.0008
[tissue]
model = "microscopic"
[cell]
model = "{model}"
integrator = "rush-larsen"
backend = "{backend}"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.0288]
duration = 1.0
current_density = -100.0
"""


def test_other_cell_models_on_the_microscopic_model(petsc, capsys):
    """TT06 (hand-written, native C), its CellML twin generated with Myokit (native C) and Beeler–Reuter 1977
    (generated, NumPy) on a 240-volume strip of myocytes: every volume activates, in order along the strip; the
    hand and generated TT06 activate at the same times (to 1e-9 ms)."""
    from cardiosim.bench.microscopic import activation
    from conftest import ROOT
    cellml = ROOT / "models"
    runs = {name: activation(config.loads(OTHER_MODELS.format(model=model, backend=backend)))
            for name, model, backend in (("tt06", "tt06", "native"),
                                         ("tt06 CellML", cellml / "ten_tusscher_model_2006_epi.cellml", "native"),
                                         ("Beeler-Reuter CellML", cellml / "beeler_reuter_model_1977.cellml",
                                          "numpy"))}
    with capsys.disabled():
        print("\n" + "\n".join(f"{k}: last volume at {v[-1]:.3f} ms" for k, v in runs.items()))
    for name, a in runs.items():
        assert np.all(np.isfinite(a)), name
        assert np.all(np.diff(a[40:]) >= 0), name                      # beyond the stimulated volumes
    assert np.max(np.abs(runs["tt06"] - runs["tt06 CellML"])) < 1e-9
