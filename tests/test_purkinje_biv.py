"""The conduction system on the built-in BiV (run/biv-purkinje.toml, and run/biv-lbbb.toml with the left bundle
branch cut), each against the same tissue activated otherwise, measured on the runs (cardiosim geometry biv at
0.1 cm, 120 ms of TT06; 5 to 12 min on one core):

- with the grown network every tissue node activates, with the left bundle cut too;
- the QRS (twelve_lead.qrs: where the RMS of the twelve leads exceeds 10 % of its peak) and the total activation
  time are narrower than the same tissue's paced from the His bundle's site with no conduction system (a
  ventricular beat through the myocardium alone, still not over at 120 ms: its figures are lower bounds), and
  wider than with both endocardial layers stimulated at once (run/biv-ecg.toml's stimulus: the limit of an
  infinitely fast network, which a network of finite speed and PMJ delays cannot beat);
- the left bundle-branch block widens the QRS and activates the LV late: the LV free wall's mean activation time
  later than the RV free wall's (within a few ms of each other with both branches), V1's QRS area more negative
  (the deep, wide S of an LBBB's V1).

The numbers measured (printed with -s) are in docs/user/ventricles.md section 8.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import h5py
import numpy as np
import pytest

from cardiosim import api
from cardiosim.analysis import twelve_lead
from cardiosim.purkinje import grow
from conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
DURATION = 120.0          # ms: the LBBB's and the septal beat's activation end before 100 ms here


def tissue_config(geo: Path, *, purkinje: bool, block: list | None = None, stimulus: dict | None = None,
                  block_distal: str = "drop") -> dict:
    """run/biv-purkinje.toml on ``geo``: with its network (``block``: branches cut), or without it and with
    ``stimulus`` instead; one snapshot (the maps and the ECG are what is measured)."""
    data = tomllib.loads((ROOT / "run" / "biv-purkinje.toml").read_text())
    data["tissue"].update(label_file=str(geo), fibre_file=str(geo))
    data["output"]["interval"] = DURATION
    data["simulation"]["progress_interval"] = 0
    if purkinje:
        data["purkinje"]["tree"]["block"] = block or []
        data["purkinje"]["tree"]["block_distal"] = block_distal
    else:
        del data["purkinje"]
        data["stimulus"] = [stimulus]
    return data


def measure(path: Path, geo: Path) -> dict:
    with h5py.File(geo) as g:
        lv_rv = g["lv_rv"][...]
    with h5py.File(path) as f:
        act = f["maps/activation_time"][...]
        tissue = f["maps/tissue"][...] > 0
        x = np.broadcast_to(f["grid/x"][...][None, None, :], act.shape)
        t = f["probes/time"][...]
        leads = {n: f["ecg"][n][...] for n in twelve_lead.LEADS}
        root = f["purkinje/points"][int(f["purkinje"].attrs["root"])] if "purkinje" in f else None
        network = ({k: f["purkinje"][k][...] for k in ("activation_time", "part", "pmj_retrograde_delay")}
                   if "purkinje" in f else None)
    # the free walls: the LV's on the -x side of its cavity, the RV's beyond the septum (x > 1 cm)
    lv_wall = tissue & (lv_rv < 0.3) & (x < 0.3)
    rv_wall = tissue & (lv_rv > 0.7) & (x > 1.0)
    q = twelve_lead.qrs(t, leads)
    return {"activated": float(np.isfinite(act[tissue]).mean()), "span": float(np.nanmax(act) - np.nanmin(act)),
            "qrs": q["duration"], "lv": float(np.mean(act[lv_wall])), "rv": float(np.mean(act[rv_wall])),
            "v1_area": twelve_lead.lead_area(t, leads["V1"], q["onset"], q["offset"]), "root": root,
            "walls": (int(lv_wall.sum()), int(rv_wall.sum())), "network": network}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, petsc):
    tmp = tmp_path_factory.mktemp("biv-purkinje")
    geo = tmp / "biv-1mm.h5"
    run_cli(["geometry", "biv", "--spacing", "0.1", "--out", geo], check=True)
    out = {}

    def run(name, data):
        done = api.run(api.config(data, name=name), output=tmp / f"{name}.h5")
        out[name] = measure(done.output, geo)

    run("normal", tissue_config(geo, purkinje=True))
    run("lbbb", tissue_config(geo, purkinje=True, block=["lbb"]))
    run("lbbb_retrograde", tissue_config(geo, purkinje=True, block=["lbb"], block_distal="retrograde"))
    endocardia = tomllib.loads((ROOT / "run" / "biv-ecg.toml").read_text())["stimulus"][0]
    run("endocardia", tissue_config(geo, purkinje=False, stimulus=endocardia))
    his_site = {**endocardia, "name": "his_site", "shape": "sphere", "radius": 0.15,
                "center": [float(c) for c in out["normal"]["root"]]}
    for k in ("coordinate", "range"):
        his_site.pop(k)
    run("septal_beat", tissue_config(geo, purkinje=False, stimulus=his_site))
    for name, m in out.items():
        print(f"{name}: activated {m['activated']:.4f}, total activation {m['span']:.2f} ms, QRS {m['qrs']:.2f} ms, "
              f"LV free wall {m['lv']:.2f} ms, RV free wall {m['rv']:.2f} ms, V1 area {m['v1_area']:.3g} mV ms")
    return out


@pytest.mark.slow
def test_the_network_activates_every_tissue_node(runs):
    assert runs["normal"]["activated"] == 1.0 and runs["lbbb"]["activated"] == 1.0
    assert min(runs["normal"]["walls"]) > 500                  # the free walls measured below are large


@pytest.mark.slow
def test_the_network_narrows_the_qrs_of_a_beat_through_the_myocardium(runs):
    normal, septal, endo = runs["normal"], runs["septal_beat"], runs["endocardia"]
    # the septal beat has not activated all by the run's end: its QRS and total activation are lower bounds
    assert 0.9 < septal["activated"]
    for key in ("qrs", "span"):
        assert endo[key] < normal[key] < septal[key] - 10.0, key


@pytest.mark.slow
def test_a_left_bundle_branch_block_widens_the_qrs_and_activates_the_lv_late(runs):
    normal, lbbb = runs["normal"], runs["lbbb"]
    assert lbbb["qrs"] > normal["qrs"] + 5.0 and lbbb["span"] > normal["span"] + 5.0
    assert abs(normal["lv"] - normal["rv"]) < 5.0
    assert lbbb["lv"] > lbbb["rv"] + 10.0
    assert lbbb["v1_area"] < normal["v1_area"] < 0.0


@pytest.mark.slow
def test_a_blocked_branchs_distal_network_is_activated_backwards_from_the_myocardium(runs):
    """block_distal = "retrograde": the left bundle's distal network, cut from the His bundle, is activated through
    its PMJs from the myocardium (retrograde delays), after the right side's; every tissue node activates and the
    LV still activates late."""
    normal, lbbb, kept = runs["normal"], runs["lbbb"], runs["lbbb_retrograde"]
    net = kept["network"]
    lv = np.isin(net["part"], [grow.PARTS[k] for k in ("lbb", "lv_fascicle", "lv_tree")])
    rv = np.isin(net["part"], [grow.PARTS[k] for k in ("rbb", "rv_fascicle", "rv_tree")])
    assert kept["activated"] == 1.0 and np.isfinite(net["activation_time"][lv]).mean() > 0.95
    assert np.isfinite(net["pmj_retrograde_delay"]).sum() > 10
    assert np.nanmin(net["activation_time"][lv]) > np.nanmin(net["activation_time"][rv]) + 5.0
    assert kept["lv"] > kept["rv"] + 5.0 and kept["qrs"] > normal["qrs"] + 5.0
    print(f"retrograde LBBB: QRS {kept['qrs']:.2f} ms (dropped {lbbb['qrs']:.2f}), LV wall {kept['lv']:.2f} ms")
