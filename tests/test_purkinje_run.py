"""[purkinje] in a run (cardiosim.purkinje.system, wired into cardiosim.simulation.loop): a network file coupled to a
1D tissue gives what the split steps give by hand (the junctions, the cable, the tissue's cells and diffusion, in
that order), /purkinje in the output; the section's mistakes are one line; without the section nothing changes."""

from __future__ import annotations

import math
from pathlib import Path

import h5py
import numpy as np
import pytest

from cardiosim import api
from conftest import run_cli
from cardiosim.purkinje import cable, coupling, network
from cardiosim.runtime.errors import UserError

ROOT = Path(__file__).resolve().parents[1]
MS = {"tau_close": 15.0}        # Mitchell-Schaeffer with a short action potential (test_purkinje_coupling.py)


def config(fibre: Path, R: float = 1000.0, **purkinje) -> dict:
    """A 0.5 cm Purkinje cable (x = 0 ... 0.5 cm) whose end joins a 0.5 cm, 1D tissue (x = 0.5 ... 1 cm; a strand of
    0.01 x 0.01 cm section)."""
    return {"simulation": {"equations": "monodomain", "duration": 25.0, "dt": 0.01, "progress_interval": 0,
                           "time_scheme": "backward-euler"},
            "grid": {"size": [0.5], "spacing": 0.01, "origin": [0.5]},
            "tissue": {"sigma_il": 2.72, "sigma_el": 2.72, "sigma_it": 2.72, "sigma_et": 2.72},
            "cell": {"model": "mitchell-schaeffer", "parameters": MS, "backend": "numpy"},
            "purkinje": {"network": str(fibre), "model": "mitchell-schaeffer", "parameters": MS,
                         "integrator": "forward-euler", "pmj_resistance": R, "pmj_radius": 0.055,
                         "pmj_depth": 0.01, "stimulus": {"current_density": -100.0, "radius": 0.05}, **purkinje},
            "output": {"interval": 25.0}}


@pytest.fixture(scope="module")
def fibre(tmp_path_factory):
    path = tmp_path_factory.mktemp("purkinje") / "fibre.vtp"
    return network.write(cable.straight(0.5, 0.05), path)


def by_hand(R: float):
    """The same steps without the time loop: the junction, the Purkinje cable, the tissue (a cable with the tissue's
    σ_m and χ is its 1D monodomain: test_purkinje_cable.py)."""
    ms = cable.make_model("mitchell-schaeffer", parameters=MS)
    fibre = cable.straight(0.5, 0.01)
    c = cable.Cable(fibre, ms, dt=0.01, stimulus=cable.Stimulus(current_density=-100.0, radius=0.05))
    slab = cable.straight(0.5, 0.01, start=(0.5, 0.0, 0.0))
    t = cable.Cable(slab, ms, sigma=1.36, dt=0.01, chi=1400.0, radius=math.sqrt(1e-4 / math.pi))
    j = coupling.Junctions(fibre.terminals, fibre.points[fibre.terminals], slab.points, 0.055, R,
                           c.C[fibre.terminals], coupling.tissue_capacitance(t.volume, 1.0, 1400.0), t.volume, 0.01)
    pmj, before = np.nan, np.nan          # the junction's tissue side, V̄_m, crossing 0 mV at the steps' ends
    for s in range(2500):
        vbar = j.tissue_potential(t.V)[0]
        if np.isnan(pmj) and before < 0.0 <= vbar:
            pmj = (s - 1) * 0.01 + 0.01 * (0.0 - before) / (vbar - before)
        before = vbar
        j.step(c.V, t.V)
        c.step(s * 0.01)
        t.step(s * 0.01)
    return c.activation, t.activation, pmj


def test_a_network_file_drives_the_tissue_as_the_split_steps_do(petsc, tmp_path, fibre):
    done = api.run(api.config(config(fibre), name="purkinje"), output=tmp_path / "run.h5")
    with h5py.File(done.output) as f:
        g = f["purkinje"]
        act, pts, pmj = g["activation_time"][...], g["points"][...], g["pmj"][...]
        assert g["activation_time"].attrs["units"] == "ms" and g.attrs["root"] == 0
        assert np.flatnonzero(pmj).tolist() == [10]          # the file's last point; the refined nodes come after
        tissue = f["maps/activation_time"][...]
        assert g["pmj_charge"][0] > 0                         # net charge into the tissue
        side, ante, retro = (g[k][...] for k in ("pmj_tissue_activation_time", "pmj_anterograde_delay",
                                                 "pmj_retrograde_delay"))
        assert g["pmj_anterograde_delay"].attrs["units"] == "ms"
    hand_p, hand_t, hand_pmj = by_hand(1000.0)
    order = np.lexsort((pts[:, 1], pts[:, 0]))               # the run's nodes by x, as the hand cable's
    np.testing.assert_allclose(act[order], hand_p, rtol=0, atol=1e-8)
    np.testing.assert_allclose(tissue, hand_t, rtol=0, atol=1e-8)
    assert tissue[0] - act[10] == pytest.approx(0.79, abs=0.01)      # the PMJ's delay, ms
    # the delay to the junction's tissue side (V̄_m over its six nodes) as by hand; anterograde, not retrograde
    np.testing.assert_allclose(side, [hand_pmj], rtol=0, atol=1e-8)
    np.testing.assert_allclose(ante, side - act[10], rtol=0, atol=1e-12)
    assert 0.5 < ante[0] < tissue[5] - act[10] and np.isnan(retro).all()
    s = done.summary["purkinje"]
    assert s == {"nodes": 51, "pmjs": 1, "activated": 51, "last_activation_ms": pytest.approx(act.max()),
                 "anterograde_pmjs": 1, "retrograde_pmjs": 0}


def test_a_large_resistance_blocks_the_junction(petsc, tmp_path, fibre):
    done = api.run(api.config(config(fibre, R=1e4), name="blocked"), output=tmp_path / "blocked.h5")
    with done.results() as r:
        assert np.isnan(r.map("activation_time")).all()
    with h5py.File(done.output) as f:
        assert np.isfinite(f["purkinje/activation_time"][...]).all()


def test_without_the_section_a_run_has_no_network(petsc, tmp_path):
    done = api.run(api.config(ROOT / "tests" / "configs" / "cable.toml"), output=tmp_path / "plain.h5")
    assert "purkinje" not in done.summary
    with h5py.File(done.output) as f:
        assert "purkinje" not in f


@pytest.mark.parametrize("change, says", [
    ({"purkinje": {"sigma": 5.0}}, "give purkinje.network"),
    ({"purkinje": {"grow": True}}, "both"),
    ({"purkinje": {"root": [0.0, 0.0]}}, "a point"),
    ({"purkinje": {"model": "no-such-model"}}, "purkinje.model"),
    ({"purkinje": {"network": "missing.vtp"}}, "purkinje.network: missing.vtp"),
])
def test_section_mistakes_are_one_line(fibre, change, says):
    data = config(fibre)
    for sec, keys in change.items():
        if sec == "purkinje" and "sigma" in keys:
            data["purkinje"] = dict(keys)
        else:
            data[sec] = {**data.get(sec, {}), **keys}
    with pytest.raises(UserError, match=says):
        api.config(data)


@pytest.mark.parametrize("block, says", [
    (["lafb"], r"purkinje.tree.block\[0\]: 'lafb' is not allowed; allowed: lbb, rbb"),
    (["lbb", "rbb"], "purkinje.tree.block: both bundle branches cut"),
    (["lbb"], "purkinje.tree.block: cuts a grown network's"),       # config() reads a network file
])
def test_a_block_names_one_bundle_branch_of_a_grown_network(fibre, block, says):
    data = config(fibre)
    data["purkinje"]["tree"] = {"block": block}
    with pytest.raises(UserError, match=says):
        api.config(data)


def test_grow_needs_a_geometry_file(fibre):
    data = config(fibre)
    data["purkinje"] = {"grow": True}
    with pytest.raises(UserError, match="tissue.label_file"):
        api.config(data)


def grown_biv_config(tmp_path) -> dict:
    """The built-in BiV at 0.1 cm (made in ``tmp_path``) with a network grown on its endocardia (bundles of 1000
    fibres, PMJs of 1 kOhm within 0.15 cm), Mitchell-Schaeffer cells, 30 ms: a config's data."""
    geo = tmp_path / "biv.h5"
    run_cli(["geometry", "biv", "--spacing", "0.1", "--out", geo], check=True)
    with h5py.File(geo) as f:
        size = [float(x) for x in f.attrs["size"]]
        origin = [float(x) for x in f.attrs["origin"]]
    data = {"simulation": {"equations": "monodomain", "duration": 30.0, "dt": 0.02, "progress_interval": 0},
            "grid": {"size": size, "spacing": 0.1, "origin": origin},
            "tissue": {"label_file": str(geo), "fibre_file": str(geo)},
            "cell": {"model": "mitchell-schaeffer"},
            "purkinje": {"grow": True, "spacing": 0.02, "fibres": 1000.0, "pmj_resistance": 1.0, "pmj_radius": 0.15,
                         "tree": {"segment": 0.04, "spacing": 0.15}},
            "checks": {"min_activated": 0.0},
            "output": {"interval": 30.0}}
    return data


@pytest.mark.slow
def test_a_grown_network_activates_the_biv(petsc, tmp_path):
    """The built-in BiV (cardiosim geometry biv at 0.1 cm), a network grown on its endocardia (bundles of 1000
    fibres: a terminal's current must excite nodes of 1 mm³), 30 ms: the network activates from the His bundle to its
    terminals, and the PMJs start the ventricles' activation."""
    data = grown_biv_config(tmp_path)
    done = api.run(api.config(data, name="biv-purkinje"), output=tmp_path / "biv-run.h5")
    with h5py.File(done.output) as f:
        act = f["purkinje/activation_time"][...]
        part = f["purkinje/part"][...]
        distance = f["purkinje/distance"][...]
        tissue = f["maps/activation_time"][...]
    assert np.isfinite(act[distance < 2.0]).all()                       # ~0.19 cm/ms: 2 cm in about 11 ms
    assert np.nanmax(act[part == 1]) < np.nanmin(act[part >= 6])       # the His bundle before the trees
    assert np.isfinite(tissue).sum() > 300
    assert np.nanmin(tissue) > np.nanmin(act[part >= 6])                 # the ventricles after the trees
    assert done.summary["purkinje"]["pmjs"] > 20
