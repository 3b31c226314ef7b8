"""Rule-based fibres and ventricular coordinates (cardiosim/domain/fibres.py, ``cardiosim geometry fibres``), the
idealised BiV (``cardiosim geometry biv``) and cell regions chosen by a coordinate (``shape = "coordinate"``).

What is known: the Q1 Laplacian reproduces linear functions exactly and ln r (harmonic in 2D) to second order; the
transmural coordinate of a thick cylinder is ln(r/r0)/ln(r1/r0); the rule's frame is orthonormal, its fibre at the
helix angle α from the circumferential direction in the plane normal to the transmural direction."""

from __future__ import annotations

import h5py
import numpy as np
import pytest

from cardiosim.domain import fibres
from conftest import run_cli
from test_bad_input import assert_one_line

S = fibres.SURFACES


def cylinder(h, r0=0.5, r1=1.0, height=0.4):
    """A thick-walled cylinder along z on a grid of spacing h: labels, surfaces (inner lv_endo, outer epi, top
    base; the bottom unlabelled, so no-flux) and the nodes' (x, y, z)."""
    n = int(round(2 * (r1 + 2 * h) / h)) + 1
    nz = int(round(height / h)) + 1
    ax = (np.arange(n) - (n - 1) / 2) * h
    z, y, x = np.meshgrid(np.arange(nz) * h, ax, ax, indexing="ij")
    r = np.hypot(x, y)
    labels = ((r >= r0) & (r <= r1)).astype(np.int32)
    _, nodes = fibres.tissue_nodes(labels)
    code = np.where(r < r0, S["lv_endo"], S["epi"])
    from cardiosim.domain.anatomy import surface_labels
    surfaces = surface_labels(nodes, np.where(nodes, 0, code))
    surfaces[nodes & (z == z.max())] |= S["base"]
    return labels, surfaces, (x, y, z), r


def test_q1_laplacian_is_exact_for_linear_and_second_order_for_log():
    """Dirichlet values of u on the cylinder's inner and outer surface nodes, A u = 0 elsewhere: a linear u (with no
    flux through the top and bottom) is reproduced to the solver's tolerance; ln r (harmonic, zero flux through the
    flat top and bottom) to second order in h."""
    errors = []
    for h in (0.05, 0.025):
        labels, surfaces, (x, y, z), r = cylinder(h)
        elements, nodes = fibres.tissue_nodes(labels)
        A = fibres.laplacian(elements, nodes, h)
        assert abs(A.sum()) < 1e-9 and np.allclose(A @ np.ones(A.shape[0]), 0.0)   # constants in its null space
        fixed = (surfaces[nodes] & (S["lv_endo"] | S["epi"])) > 0
        linear = (0.3 * x + 0.2 * y)[nodes]           # no z: the flat top and bottom are no-flux
        u = fibres.solve_laplace(A, fixed, linear, "linear")
        assert np.abs(u - linear).max() < 1e-7
        exact = np.log(r[nodes])
        u = fibres.solve_laplace(A, fixed, exact, "log")
        errors.append(np.abs(u - exact).max())
    print(f"\nln r on the cylinder: max error {errors[0]:.2e} (h 0.05), {errors[1]:.2e} (h 0.025), "
          f"order {np.log2(errors[0] / errors[1]):.2f}")
    assert errors[1] < 2e-3 and errors[0] / errors[1] > 3.0


def test_cylinder_transmural_coordinate():
    """The whole computation on the thick cylinder: the transmural coordinate is ln(r/r0)/ln(r1/r0) with r0, r1
    the mean radii of the staircase's inner and outer surface nodes: within 0.01 in the median, 0.06 at most (the
    staircase's nodes lie up to a spacing off the circles: first order there; measured 0.005 and 0.052 at 0.25 mm);
    the fibres are orthonormal to the sheets and normals, and the sheet (β = 0) is radial. (The helix angle against
    the rule is checked on the idealised LV, tests/test_geometry.py: a cylinder has no apex, and the longitudinal
    direction from a point on its bottom rim is not its axis.)"""
    h = 0.025
    labels, surfaces, (x, y, z), r = cylinder(h)
    out = fibres.compute(labels, surfaces, h, (x.min(), y.min(), 0.0), log=lambda s: None)
    nodes = np.isfinite(out["transmural"])
    t = out["transmural"][nodes]
    r0 = r[nodes & (surfaces == S["lv_endo"])].mean()                        # the rim (also base) left out
    r1 = r[nodes & (surfaces == S["epi"])].mean()
    want = np.clip(np.log(r[nodes] / r0) / np.log(r1 / r0), 0, 1)
    print(f"\ntransmural coordinate against ln(r/r0)/ln(r1/r0): max {np.abs(t - want).max():.4f}, "
          f"median {np.median(np.abs(t - want)):.4f}")
    assert np.median(np.abs(t - want)) < 0.01 and np.abs(t - want).max() < 0.06
    f, s, n = (out[k][nodes] for k in ("fibres", "sheets", "normals"))
    for a in (f, s, n):
        assert np.allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-12)
    assert np.abs(np.sum(f * s, axis=1)).max() < 1e-12 and np.allclose(np.cross(f, s), n)
    radial = np.stack([x[nodes], y[nodes], 0 * x[nodes]], axis=1) / r[nodes][:, None]
    up = z[nodes] > 0.1
    assert np.median(np.abs(np.sum(s * radial, axis=1))[up]) > 0.999


def test_frame_rule_angles():
    """oriented(): for random frames and angles, the fibre makes the helix angle with e0 = e1 × e2 in the plane
    normal to e2, the sheet the sheet angle with e2, and (fibre, sheet, normal) is a right-handed orthonormal
    frame."""
    rng = np.random.default_rng(1)
    lon, tra = rng.normal(size=(500, 3)), rng.normal(size=(500, 3))
    a, b = rng.uniform(-1.5, 1.5, 500), rng.uniform(-1.5, 1.5, 500)
    f, s, n = fibres.oriented(lon, tra, a, b)
    e2 = tra / np.linalg.norm(tra, axis=1, keepdims=True)
    e1 = lon - np.sum(lon * e2, axis=1, keepdims=True) * e2
    e1 /= np.linalg.norm(e1, axis=1, keepdims=True)
    e0 = np.cross(e1, e2)
    assert np.allclose(np.sum(f * e2, axis=1), 0) and np.allclose(np.arctan2(np.sum(f * e1, 1), np.sum(f * e0, 1)), a)
    assert np.allclose(np.sum(s * e2, axis=1), np.cos(b))
    assert np.allclose(np.einsum("ij,ij->i", np.cross(f, s), n), 1.0)
    assert np.allclose(np.sum(f * s, axis=1), 0) and np.allclose(np.sum(f * n, axis=1), 0)


@pytest.fixture(scope="module")
def lv_file(tmp_path_factory):
    """``cardiosim geometry lv`` at 1 mm, and the config lines it printed."""
    path = tmp_path_factory.mktemp("lv") / "lv.h5"
    lines = run_cli(["geometry", "lv", "--spacing", "0.1", "--out", path], check=True).stdout
    return path, lines[lines.index("[grid]"):]


def _read(path):
    with h5py.File(path) as f:
        return {k: f[k][()] for k in f}, dict(f.attrs)


def test_idealised_biv(tmp_path):
    """Both ventricles at 1 mm: labels 1 (LV and septum) and 2 (RV free wall), the four surfaces, coordinates in
    [0, 1] with their Dirichlet values on the surfaces (lv_rv 0 on the LV endocardium, 1 on the RV's), orthonormal
    frames everywhere; the septum's middle (between the cavities, lv_rv near 0.5) has circumferential fibres (the
    rule's 0° mid-wall) and a transmural coordinate near 0.5 (never more: the septum has no epicardium), and the fibres turn through the RV free wall as through the LV's: the helix angle at the RV
    endocardium is of the other sign than at the RV epicardium."""
    out = tmp_path / "biv.h5"
    proc = run_cli(["geometry", "biv", "--spacing", "0.1", "--out", out], check=True)
    assert "both ventricles" in proc.stdout and 'fibre_file = "' in proc.stdout
    g, attrs = _read(out)
    t = np.isfinite(g["transmural"])
    assert set(np.unique(g["labels"][t])) == {1, 2}
    assert np.bitwise_or.reduce(g["surfaces"][t].ravel()) == 15                 # all four surfaces
    for k in ("transmural", "apex_base", "lv_rv"):
        assert np.nanmin(g[k]) == 0.0 and np.nanmax(g[k]) == 1.0 and not np.isfinite(g[k][~t]).any()
    surf = g["surfaces"]
    on = {k: (surf & bit) > 0 for k, bit in S.items()}
    assert np.all(g["lv_rv"][on["lv_endo"]] == 0) and np.all(g["lv_rv"][on["rv_endo"] & ~on["lv_endo"]] == 1)
    assert np.all(g["transmural"][on["epi"] & ~on["lv_endo"] & ~on["rv_endo"]] == 1)
    assert np.all(g["transmural"][on["lv_endo"] | on["rv_endo"]] == 0)
    f, s, n = g["fibres"][t], g["sheets"][t], g["normals"][t]
    assert np.allclose(np.linalg.norm(f, axis=1), 1) and np.allclose(np.linalg.norm(s, axis=1), 1)
    assert np.abs(np.sum(f * s, axis=1)).max() < 1e-12 and np.allclose(np.cross(f, s), n)
    assert attrs["helix_angles_deg"].tolist() == [60.0, -60.0]
    z, y, x = np.meshgrid(*(attrs["origin"][d] + np.arange(attrs["shape"][d]) * 0.1 for d in (2, 1, 0)),
                          indexing="ij")
    rho = np.hypot(x, y)
    circ = np.stack([-y, x, np.zeros_like(x)], axis=-1) / np.maximum(rho, 1e-12)[..., None]
    along = np.sum(g["fibres"] * circ, axis=-1)
    helix = np.degrees(np.arctan2(g["fibres"][..., 2] * np.sign(along), np.abs(along)))
    mid = t & (g["labels"] == 1) & (np.abs(g["lv_rv"] - 0.5) < 0.15) & (np.abs(y) < 0.3) & (z < 0) & (z > -1.0)
    # the septum between the cavities at y ≈ 0 lies at x from 0.7 (LV endocardium) to 1.0 (LV epicardium)
    assert mid.sum() >= 3 and np.all((x[mid] > 0.6) & (x[mid] < 1.1)), x[mid]
    print(f"\nmid-septum helix (about the LV's axis): median {np.median(helix[mid]):+.1f}° over {mid.sum()} nodes; "
          f"transmural coordinate there {np.median(g['transmural'][mid]):.2f}")
    assert abs(np.median(helix[mid])) < 15.0
    assert np.median(g["transmural"][mid]) > 0.3 and np.max(g["transmural"][mid]) <= 0.5 + 1e-6    # no epicardium
    # the RV free wall at y ≈ 0, x > 1.4 (its cavity reaches x = 1.5): helix about the LV's axis
    wall = t & (g["labels"] == 2) & (np.abs(y) < 0.25) & (z < 0) & (z > -1.0)
    endo, epi = wall & on["rv_endo"], wall & on["epi"]
    print(f"RV free wall helix: endocardium {np.median(helix[endo]):+.1f}°, epicardium {np.median(helix[epi]):+.1f}°")
    assert np.median(helix[endo]) > 30.0 and np.median(helix[epi]) < -30.0


def test_geometry_fibres_command(tmp_path, lv_file):
    """``geometry fibres`` remakes an LV file's fibres and coordinates: with the defaults exactly those
    ``geometry lv`` wrote; with other angles the transmural coordinate is the same and the fibres turn by the
    other rule (Bayer's 40°/−50° here: −5° mid-wall)."""
    lv = lv_file[0]
    same = tmp_path / "same.h5"
    proc = run_cli(["geometry", "fibres", lv, "--out", same], check=True)
    assert "fibres" in proc.stdout
    a, _ = _read(lv)
    b, attrs = _read(same)
    assert set(a) == set(b)
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True), k
    other = tmp_path / "other.h5"
    run_cli(["geometry", "fibres", lv, "--out", other, "--helix-endo", "40", "--helix-epi", "-50"], check=True)
    c, attrs = _read(other)
    assert attrs["helix_angles_deg"].tolist() == [40.0, -50.0]
    assert np.array_equal(a["transmural"], c["transmural"], equal_nan=True)
    t = np.isfinite(c["transmural"])
    turned = np.degrees(np.arccos(np.clip(np.abs(np.sum(a["fibres"][t] * c["fibres"][t], axis=1)), 0, 1)))
    want = np.abs((60 - 120 * c["transmural"][t]) - (40 - 90 * c["transmural"][t]))
    assert np.abs(turned - want).max() < 1e-6


@pytest.mark.parametrize("case,args,words", [
    ("no file", ["geometry", "fibres", "--out", "{d}/o.h5"], ["geometry fibres", "give the geometry file"]),
    ("no surfaces", ["geometry", "fibres", "{d}/plain.h5", "--out", "{d}/o.h5"], ["plain.h5", "surfaces"]),
    ("angle", ["geometry", "fibres", "{d}/lv.h5", "--out", "{d}/o.h5", "--helix-endo", "120"],
     ["--helix-endo", "[-90, 90]"]),
    ("reads itself", ["geometry", "fibres", "{d}/lv.h5", "--out", "{d}/lv.h5", "--overwrite"], ["lv.h5", "reads"]),
    ("no spacing", ["geometry", "biv", "--out", "{d}/o.h5"], ["--spacing"]),
    ("spacing for fibres", ["geometry", "fibres", "{d}/lv.h5", "--out", "{d}/o.h5", "--spacing", "0.1"],
     ["--spacing", "not used by cardiosim geometry fibres"]),
    ("coarse", ["geometry", "lv", "--spacing", "0.2", "--out", "{d}/o.h5"], ["spacing 0.2", "finer --spacing"]),
    ("angles for a mesh", ["geometry", "{d}/heart.vtu", "--spacing", "0.1", "--out", "{d}/o.h5", "--helix-endo", "50"],
     ["--helix-endo", "a mesh keeps its own"]),
])
def test_bad_fibres_input_is_one_line(tmp_path, lv_file, case, args, words):
    (tmp_path / "lv.h5").write_bytes(lv_file[0].read_bytes())
    with h5py.File(tmp_path / "plain.h5", "w") as f:
        f["labels"] = np.ones((3, 3, 3), dtype=np.int32)
        f.attrs["spacing"], f.attrs["origin"] = 0.1, (0.0, 0.0, 0.0)
    proc = run_cli([a.format(d=tmp_path) for a in args])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "o.h5").exists()


REGION_RUN = """
[simulation]
equations = "monodomain"
duration = 10.0
dt = 0.05
progress_interval = 0
{grid}
sigma_il = 17.4
sigma_it = 1.9
sigma_el = 62.5
sigma_et = 23.6
[cell]
model = "mitchell-schaeffer"
[[cell.regions]]
shape = "coordinate"
coordinate = "transmural"
range = [0.5, 1.0]
parameters = {{ tau_in = 300.0 }}
[[stimulus]]
shape = "coordinate"
coordinate = "transmural"
range = [0.0, 0.05]
duration = 2.0
current_density = -100.0
[output]
interval = 5.0
"""


@pytest.mark.slow
def test_cell_regions_by_a_coordinate(tmp_path, lv_file):
    """The outer half of the wall made unexcitable from the config alone (a cell region by the transmural
    coordinate, 0.5-1, whose inward current is a thousand times slower), the endocardium stimulated (a stimulus by
    the same coordinate): in 10 ms every endocardial node activates and no node of the region does, where without
    the region the whole wall does."""
    geo, grid = lv_file
    g, _ = _read(geo)
    t = g["transmural"]
    acts = {}
    for case in ("region", "none"):
        text = REGION_RUN.format(grid=grid)
        if case == "none":
            text = text[:text.index("[[cell.regions]]")] + text[text.index("[[stimulus]]"):]
        cfg = tmp_path / f"{case}.toml"
        cfg.write_text(text)
        run_cli(["run", cfg, "--output", tmp_path / f"{case}.h5", "--quiet"], check=True)
        with h5py.File(tmp_path / f"{case}.h5") as r:
            acts[case], tissue = r["maps/activation_time"][()], r["maps/tissue"][()] > 0
    endo, outer = tissue & (t == 0), tissue & (t >= 0.5)
    print(f"\nactivated in 10 ms, with the region: endocardium {np.isfinite(acts['region'][endo]).mean():.0%}, "
          f"outer half {np.isfinite(acts['region'][outer]).mean():.0%} ({outer.sum()} nodes); without it: "
          f"{np.isfinite(acts['none'][outer]).mean():.0%}")
    assert endo.sum() > 500 and outer.sum() > 500
    assert np.isfinite(acts["region"][endo]).all() and not np.isfinite(acts["region"][outer]).any()
    assert np.isfinite(acts["none"][tissue]).all()


@pytest.mark.parametrize("case,region,words", [
    ("no range", 'shape = "coordinate"\ncoordinate = "transmural"\n', ["cell.regions[0].range", "missing"]),
    ("lv_rv of an LV", 'shape = "coordinate"\ncoordinate = "lv_rv"\nrange = [0.0, 0.5]\n',
     ["cell.regions[0].coordinate", "no dataset 'lv_rv'"]),
    ("upside down", 'shape = "coordinate"\ncoordinate = "apex_base"\nrange = [0.5, 0.2]\n',
     ["cell.regions[0].range", "lower must be <= upper"]),
    ("box keys", 'shape = "coordinate"\ncoordinate = "transmural"\nrange = [0.0, 0.3]\nradius = 1.0\n',
     ["cell.regions[0].radius", "not used by a coordinate region"]),
    ("range on a box", 'shape = "box"\nlower = [0, 0, 0]\nupper = [1, 1, 1]\nrange = [0.0, 0.3]\n',
     ["cell.regions[0].range", "only for shape = 'coordinate'"]),
])
def test_bad_coordinate_regions(tmp_path, lv_file, case, region, words):
    text = REGION_RUN.format(grid=lv_file[1])
    start = text.index("[[cell.regions]]")
    text = text[:start] + "[[cell.regions]]\n" + region + "parameters = { tau_in = 300.0 }\n" + \
        text[text.index("[[stimulus]]"):]
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    proc = run_cli(["config", "check", cfg])
    assert_one_line(proc, case, words)


def test_gmsh_mesh_surfaces_give_the_coordinates(tmp_path):
    """A slab of tetrahedra (0.4 × 0.3 × 0.2 cm) written as Gmsh 2.2 with named physical surfaces, as
    cardiac-geometries-core names them (ENDO at x = 0, EPI at x = 0.4, BASE on top; the other faces untagged):
    the grid's surface nodes get those codes (the untagged faces none), and ``geometry fibres`` gives the
    transmural coordinate of the slab, x / 0.4, exactly (the Laplace solution is linear)."""
    import meshio
    from test_geometry import box_mesh
    pts, tets, tags, _ = box_mesh()
    faces = []                                   # the boundary triangles: faces of one tetrahedron only
    for tet in tets:
        for k in range(4):
            faces.append(tuple(sorted(np.delete(tet, k))))
    faces, counts = np.unique(np.array(faces), axis=0, return_counts=True)
    faces = faces[counts == 1]
    c = pts[faces].mean(axis=1)
    face_tag = np.select([c[:, 0] < 1e-9, c[:, 0] > 0.4 - 1e-9, c[:, 2] > 0.2 - 1e-9], [10, 20, 30], 0)
    faces, face_tag = faces[face_tag > 0], face_tag[face_tag > 0]
    mesh = meshio.Mesh(pts, [("triangle", faces), ("tetra", tets)],
                       cell_data={"gmsh:physical": [face_tag, np.ones(len(tets), dtype=int)],
                                  "gmsh:geometrical": [face_tag, np.ones(len(tets), dtype=int)]},
                       field_data={"ENDO": np.array([10, 2]), "EPI": np.array([20, 2]), "BASE": np.array([30, 2]),
                                   "MYOCARDIUM": np.array([1, 3])})
    meshio.write(tmp_path / "slab.msh", mesh, file_format="gmsh22", binary=False)
    geo, out = tmp_path / "slab.h5", tmp_path / "slab-fibres.h5"
    proc = run_cli(["geometry", tmp_path / "slab.msh", "--spacing", "0.05", "--out", geo], check=True)
    assert "geometry fibres" in proc.stdout                 # no fibres in the mesh: the hint
    run_cli(["geometry", "fibres", geo, "--out", out], check=True)
    g, attrs = _read(out)
    t = np.isfinite(g["transmural"])
    z, y, x = np.meshgrid(*(attrs["origin"][d] + np.arange(attrs["shape"][d]) * 0.05 for d in (2, 1, 0)),
                          indexing="ij")
    surf = g["surfaces"]
    assert np.all(x[(surf & S["lv_endo"]) > 0] < 1e-9) and np.all(x[(surf & S["epi"]) > 0] > 0.4 - 1e-9)
    assert np.all(z[(surf & S["base"]) > 0] > 0.2 - 1e-9)
    assert not surf[t & (x > 0.01) & (x < 0.39) & (z < 0.19)].any()             # untagged faces: none
    assert np.abs(g["transmural"][t] - x[t] / 0.4).max() < 1e-8
    assert np.allclose(np.linalg.norm(g["fibres"][t], axis=1), 1.0)


BIV_RUN = """
[simulation]
equations = "monodomain"
duration = 15.0
dt = 0.05
progress_interval = 0
{grid}
sigma_il = 17.4
sigma_it = 1.9
sigma_el = 62.5
sigma_et = 23.6
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
name = "endocardia"
shape = "coordinate"
coordinate = "transmural"
range = [0.0, 0.05]
duration = 2.0
current_density = -100.0
[ecg]
[[ecg.electrodes]]
name = "left"
position = [-4.0, 0.0, -0.5]
[[ecg.electrodes]]
name = "right"
position = [5.0, 0.0, -0.5]
[[ecg.leads]]
name = "lr"
plus = "left"
minus = "right"
[output]
interval = 10.0
"""


@pytest.mark.slow
def test_biv_activates_from_both_endocardia(tmp_path):
    """The BiV at 1 mm (conductivities ten times the defaults, as the LV's paced test: Mitchell–Schaeffer's front
    is resolved), stimulated on both endocardia from the config alone (a stimulus by the transmural coordinate):
    both endocardia, the septum's two faces included, activate within the stimulus; the epicardium later; every
    tissue node activates (measured: 7.7 ms in all at these conductivities). Reported: total activation time and
    the lead's QRS-like width."""
    geo = tmp_path / "biv.h5"
    lines = run_cli(["geometry", "biv", "--spacing", "0.1", "--out", geo], check=True).stdout
    cfg = tmp_path / "biv.toml"
    cfg.write_text(BIV_RUN.format(grid=lines[lines.index("[grid]"):]))
    run_cli(["run", cfg, "--output", tmp_path / "run.h5", "--quiet"], check=True)
    g, _ = _read(geo)
    with h5py.File(tmp_path / "run.h5") as r:
        act, tissue = r["maps/activation_time"][()], r["maps/tissue"][()] > 0
        t, lead = r["probes/time"][()], r["ecg/lr"][()]
    surf = g["surfaces"]
    lv, rv, epi = (tissue & ((surf & S[k]) > 0) & ((surf & S["base"]) == 0) for k in ("lv_endo", "rv_endo", "epi"))
    big = t[np.abs(lead) > 0.1 * np.abs(lead).max()]
    print(f"\nBiV from both endocardia: LV endocardium {np.median(act[lv]):.1f} ms, RV endocardium "
          f"{np.median(act[rv]):.1f} ms, epicardium {np.median(act[epi]):.1f} ms, total activation time "
          f"{np.nanmax(act[tissue]):.1f} ms; lead QRS-like width {big.max() - big.min():.1f} ms")
    assert np.all(np.isfinite(act[tissue]))
    assert np.max(act[lv]) < 2.5 and np.max(act[rv]) < 2.5
    assert np.median(act[epi]) > 3 * np.median(act[lv])


def test_biv_example_config_is_valid(tmp_path):
    """run/biv-ecg.toml with the file it reads made as its comment says (cardiosim geometry biv --spacing 0.05):
    its [grid] is the one the command prints, and the config is valid (regions and stimulus by coordinate)."""
    from pathlib import Path
    from cardiosim import config
    geo = tmp_path / "biv.h5"
    lines = run_cli(["geometry", "biv", "--spacing", "0.05", "--out", geo], check=True).stdout
    example = Path(__file__).resolve().parents[1] / "run" / "biv-ecg.toml"
    text = example.read_text()
    for line in ("size = [3.2, 3.6, 2.8]", "spacing = 0.05", "origin = [-1.05, -1.65, -2.05]"):
        assert line in lines and line in text, line
    cfg = config.load(example, [f'tissue.label_file="{geo}"', f'tissue.fibre_file="{geo}"'])
    assert [r.shape for r in cfg.cell.regions] == ["coordinate", "coordinate"]
    # endo (cell.parameters), M and epi O'Hara-Rudy cells, and the 12 leads round the BiV
    assert cfg.cell.model.endswith("ohara_rudy_2011_endo.cellml")
    assert [cfg.cell.parameters["celltype"], *(r.parameters["celltype"] for r in cfg.cell.regions)] == [0, 2, 1]
    assert [x.name for x in cfg.ecg.leads] == ["I", "II", "III", "aVR", "aVL", "aVF", *(f"V{i}" for i in range(1, 7)),
                                               "WCT"]
