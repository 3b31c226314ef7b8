"""The human-size BiV (``cardiosim geometry biv --size human``, cardiosim.domain.anatomy.HUMAN) and its example
run/human-biv.toml: the dimensions the docstring gives (from Lang et al. 2015's normal values) measured on the
generated grid, the 12 leads round it, and a short run on a coarse grid that starts and activates the tissue the
stimulus holds."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from cardiosim.analysis import twelve_lead
from cardiosim.domain import anatomy
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]


def runs(line: np.ndarray) -> list[tuple[bool, int, int]]:
    """(value, first, last) of each run of equal values along a 1D boolean line."""
    edges = np.flatnonzero(np.diff(line.astype(np.int8))) + 1
    starts, ends = np.concatenate([[0], edges]), np.concatenate([edges, [len(line)]]) - 1
    return [(bool(line[a]), int(a), int(b)) for a, b in zip(starts, ends)]


def wall_crossings(y: float, z: float) -> tuple:
    """Along x at (y, z), from the shapes (cm): the LV free wall, the LV cavity, the septum, the RV cavity, the RV
    free wall."""
    s = anatomy.HUMAN
    r_epi = np.sqrt(s.lv_epi[0] ** 2 * (1 - (z / s.lv_epi[1]) ** 2) - y ** 2)
    r_endo = np.sqrt(s.lv_endo[0] ** 2 * (1 - (z / s.lv_endo[1]) ** 2) - y ** 2)
    rv = [s.rv_centre[0] + a[0] * np.sqrt(1 - (y / a[1]) ** 2 - (z / a[2]) ** 2) for a in (s.rv_endo, s.rv_epi)]
    return r_epi - r_endo, 2 * r_endo, r_epi - r_endo, rv[0] - r_epi, rv[1] - rv[0]


@pytest.mark.parametrize("h", [0.2, 0.1])
def test_human_biv_dimensions(h):
    """Measured on the mask within a grid spacing (a wall from its first to its last tissue node and half a spacing
    beyond each, a cavity from the last node of one wall to the first of the next less half a spacing at each end),
    at 0.2 and 0.1 cm: base to epicardial apex 9.0 cm; in the four-chamber
    plane (y = 0) at the equator (z = 0), from −x to +x: the LV free wall 1.0 cm, the LV cavity 5.0 cm, the
    septum 1.0 cm, the RV cavity 3.25 cm, the RV free wall 0.4 cm (labels 1, 1, 2); the RV cavity's length from
    the base plane 7.0 cm."""
    box, fields = anatomy.idealised_biv(h, size=anatomy.HUMAN)
    labels = fields["labels"]
    x, y, z = box.axes()
    tissue = labels > 0
    zs = z[np.any(tissue, axis=(1, 2))]
    assert abs((zs.max() - zs.min()) - 9.0) <= h + 1e-9
    iy, iz = int(np.argmin(abs(y))), int(np.argmin(abs(z)))           # the grid's planes nearest y = 0, z = 0
    line = tissue[iz, iy]
    # a wall's nodes span its thickness less up to 2h, a cavity's walls' last and first ones more up to 2h: both
    # taken half a spacing out (in) at each end, they are the thickness within h
    pieces = [(v, (x[b] - x[a] + h) if v else (x[b + 1] - x[a - 1] - h)) for v, a, b in runs(line)[1:-1]]
    print(f"\nh = {h} cm, y = {y[iy]:.2f}, z = {z[iz]:.2f}: "
          + ", ".join(f"{'wall' if v else 'cavity'} {d:.2f}" for v, d in pieces))
    assert [v for v, _ in pieces] == [True, False, True, False, True]
    want = wall_crossings(y[iy], z[iz])
    if h == 0.1:
        assert np.allclose(want, (1.0, 5.0, 1.0, 3.25, 0.4))                        # the nominal ones, at y = z = 0
    for (_, got), w in zip(pieces, want):
        assert abs(got - w) <= h + 1e-9, (got, w)
    walls = [labels[iz, iy, a] for v, a, _ in runs(line)[1:-1] if v]
    assert walls == [1, 1, 2]
    # the RV cavity's lowest point: the lowest tissue node on the RV endocardium (fibres.SURFACES: bit 4)
    lowest = z[np.any((fields["surfaces"] & 4) > 0, axis=(1, 2))].min()
    assert abs((anatomy.HUMAN.base_z - lowest) - 7.0) <= 2 * h + 1e-9


def test_human_twelve_leads_lie_outside_the_heart():
    """The human-biv electrodes (the adult torso's, unscaled) lie outside the tissue, the nearest (C2, over the
    RV) more than 1.5 cm from it, and where the idealised BiV's are, scaled by 1/0.3 about the heart's centre."""
    from scipy.spatial import cKDTree
    box, fields = anatomy.idealised_biv(0.2, size=anatomy.HUMAN)
    z, y, x = np.nonzero(fields["labels"] > 0)
    near, _ = cKDTree(box.origin + 0.2 * np.stack([x, y, z], axis=1)).query(
        np.array(list(twelve_lead.positions("human-biv").values())))
    assert near.min() > 1.5
    small, big = twelve_lead.positions("biv"), twelve_lead.positions("human-biv")
    c_small, c_big = np.array(twelve_lead.CENTRE["biv"]), np.array(twelve_lead.CENTRE["human-biv"])
    for n in twelve_lead.ELECTRODES:
        assert np.allclose((np.array(big[n]) - c_big) * 0.3, np.array(small[n]) - c_small, atol=1e-3)


def test_human_biv_example_grid_is_the_commands():
    """run/human-biv.toml's [grid] is what cardiosim geometry biv --size human --spacing 0.025 prints."""
    lines = anatomy.config_lines(Path("out/human-biv.h5"), anatomy.built_in_box(anatomy.HUMAN, 0.025))
    text = (ROOT / "run" / "human-biv.toml").read_text()
    for line in ("size = [10.8, 10, 9.2]", "spacing = 0.025", "origin = [-3.525, -4.925, -8.025]"):
        assert line in lines and line in text, line


def test_human_biv_short_run_activates_the_endocardia(tmp_path):
    """run/human-biv.toml on the human BiV made at 0.15 cm (its grid and files by --set; at 0.2 cm the 0.4 cm RV
    wall is two spacings and falls apart into pieces of tissue), 3 ms: the run starts, every node of the stimulated
    layer (transmural coordinate up to 0.1) activates during the 1 ms pulse, and the 12 leads and WCT are
    recorded, finite."""
    geo = tmp_path / "human.h5"
    proc = run_cli(["geometry", "biv", "--size", "human", "--spacing", "0.15", "--out", geo], check=True)
    assert "human-size BiV" in h5py.File(geo)["/"].attrs["source"]
    grid = {k.split(" = ")[0]: k.split(" = ")[1] for k in proc.stdout.splitlines() if " = " in k}
    sets = [f"grid.{k}={grid[k]}" for k in ("size", "spacing", "origin")]
    sets += [f'tissue.label_file="{geo}"', f'tissue.fibre_file="{geo}"', "simulation.duration=3.0",
             "output.interval=1.0", "simulation.progress_interval=0"]
    out = tmp_path / "run.h5"
    run_cli(["run", ROOT / "run" / "human-biv.toml", "--output", out, "--quiet",
             *[a for s in sets for a in ("--set", s)]], check=True)
    with h5py.File(geo) as g, h5py.File(out) as r:
        t = g["transmural"][()]
        act = r["maps/activation_time"][()]
        leads = {k: r[f"ecg/{k}"][()] for k in (*twelve_lead.LEADS, "WCT")}
    layer = np.isfinite(t) & (t <= 0.1)
    print(f"\nhuman BiV at 0.15 cm, 3 ms: {layer.sum()} stimulated nodes, activated at "
          f"{np.nanmin(act):.2f}-{np.nanmax(act[layer]):.2f} ms; {np.isfinite(act).sum()} nodes activated")
    assert layer.sum() > 1000 and np.all(np.isfinite(act[layer])) and np.nanmax(act[layer]) < 1.5
    assert all(np.all(np.isfinite(v)) and len(v) > 1 for v in leads.values())


@pytest.mark.parametrize("case,args,words", [
    ("a mesh", ["geometry", "{d}/heart.vtu", "--size", "human", "--spacing", "0.1", "--out", "{d}/o.h5"],
     ["--size", "lv and biv"]),
    ("geometry fibres", ["geometry", "fibres", "{d}/g.h5", "--size", "human", "--out", "{d}/o.h5"],
     ["--size", "not used by cardiosim geometry fibres"]),
    ("not a size", ["geometry", "biv", "--size", "giant", "--spacing", "0.1", "--out", "{d}/o.h5"],
     ["--size", "invalid choice", "human"]),
])
def test_bad_size_is_one_line(tmp_path, case, args, words):
    """--size is for the built-in ventricles only, and one of idealised, human: one line, exit 2, nothing written."""
    from test_bad_input import assert_one_line
    proc = run_cli([a.replace("{d}", str(tmp_path)) for a in args])
    assert_one_line(proc, case, words)
    assert not (tmp_path / "o.h5").exists()
