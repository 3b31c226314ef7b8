"""The standard 12-lead pseudo-ECG (ecg.twelve_lead; cardiosim/analysis/twelve_lead.py).

Against what is known:
- Einthoven's law I + III = II, the augmented leads' sum aVR + aVL + aVF = 0, and Vi = φ(Ci) − WCT with Wilson's
  terminal the mean of RA, LA and LL, on any Vm (to round-off);
- a plane front crossing a small block of tissue at the BiV's centre is, seen from the electrodes (2 cm and more
  away), a current dipole in an infinite medium, φ = −σ_i ΔV A n·(x − c) / (4π σ_b |x − c|³): every one of the
  twelve leads equals that dipole's within 1.5 % of the largest lead (measured: 0.6 % at worst, V3,
  the closest electrode, where the block's higher multipoles show; the limb leads 0.01 %);
- the electrodes lie round the built-in BiV as the chest's do round a heart: V1 over the RV, V1 → V6 from the RV's
  side to the LV's lateral wall, LL below the apex, every electrode outside the tissue;
- a run writes the leads with their formulas; inspect lists them, plot draws the printed 3 x 4 layout.
"""

from __future__ import annotations

import math

import h5py
import numpy as np
import pytest

from cardiosim import config
from cardiosim.analysis import twelve_lead
from conftest import run_cli

SIGMA_I, SIGMA_B = 1.5, 2.0                   # mS/cm (isotropic intracellular: the dipole is along the front's normal)
CENTRE = np.array(twelve_lead.CENTRE["biv"])
HALF = 0.2                                    # cm: the block is 0.4 cm across
W, DV = 0.03, 100.0                           # the front: V = −35 + (ΔV/2)·tanh((n·(x − c))/W) mV


def block(h: float, extra: str = "") -> config.Config:
    return config.loads(f"""
[simulation]
duration = 1.0
dt = 0.01
[grid]
size = [{2 * HALF}, {2 * HALF}, {2 * HALF}]
spacing = {h}
origin = {[round(float(v), 6) for v in CENTRE - HALF]}
[tissue]
sigma_il = {SIGMA_I}
sigma_it = {SIGMA_I}
[ecg]
bath_conductivity = {SIGMA_B}
twelve_lead = "biv"
{extra}
""")


def traces(cfg, vm) -> dict[str, float]:
    from cardiosim.analysis.ecg import PseudoEcg
    from cardiosim.domain.grid import Grid
    from cardiosim.tissue.equations import Monodomain
    grid = Grid(cfg)
    ecg = PseudoEcg(cfg, grid, Monodomain(grid, cfg, "star").intracellular())
    V = grid.vec()
    V.getArray()[:] = vm(grid.coords())
    names = [x.name for x in cfg.ecg.electrodes] + [x.name for x in cfg.ecg.leads]
    return dict(zip(names, ecg(V)))


def test_the_leads_obey_einthoven_goldberger_and_wilson(petsc):
    cfg = block(0.05)
    t = traces(cfg, lambda xyz: np.random.default_rng(3).normal(-40.0, 30.0, len(xyz)))
    scale = max(abs(t[n]) for n in twelve_lead.ELECTRODES)
    assert scale > 0
    assert abs(t["I"] + t["III"] - t["II"]) <= 1e-12 * scale
    assert abs(t["aVR"] + t["aVL"] + t["aVF"]) <= 1e-12 * scale
    wct = (t["RA"] + t["LA"] + t["LL"]) / 3
    assert t["WCT"] == pytest.approx(wct, rel=1e-13, abs=1e-15 * scale)
    for i in range(1, 7):
        assert t[f"V{i}"] == pytest.approx(t[f"C{i}"] - wct, rel=1e-12, abs=1e-13 * scale)
    assert [x.name for x in cfg.ecg.leads] == list(twelve_lead.TRACES)
    assert cfg.ecg.leads[twelve_lead.TRACES.index("aVL")].formula() == "1 LA - 0.5 RA - 0.5 LL"


@pytest.mark.parametrize("normal", [(1.0, 0.0, 0.0), (0.0, 0.0, -1.0)])
def test_a_plane_front_is_a_dipole_in_every_lead(petsc, normal):
    """The front crosses the block along ``normal`` (the RV-to-LV direction, then base to apex)."""
    n = np.array(normal)

    def vm(xyz):
        return -35.0 + 0.5 * DV * np.tanh(((xyz - CENTRE) @ n) / W)

    got = traces(block(0.02), vm)
    # the dipole: −σ_i ∫∇V over the block = −σ_i A ΔV n (V' = 0 at the block's faces), A = (2 HALF)²
    p = -SIGMA_I * (2 * HALF) ** 2 * DV * math.tanh(HALF / W) * n
    pos = twelve_lead.positions("biv")
    phi = {e: float(p @ (np.array(x) - CENTRE)) / (4 * math.pi * SIGMA_B * np.linalg.norm(np.array(x) - CENTRE) ** 3)
           for e, x in pos.items()}
    want = {lead: sum(w * phi[e] for e, w in ws.items()) for lead, ws in twelve_lead.weights().items()}
    top = max(abs(v) for k, v in want.items() if k in twelve_lead.LEADS)
    errors = {k: abs(got[k] - want[k]) / top for k in twelve_lead.LEADS}
    assert max(errors.values()) < 0.015, errors
    assert top > 0.05                                      # mV: a real signal, not two zeros compared


def test_electrodes_lie_round_the_biv_as_round_a_heart():
    pos = {k: np.array(v) for k, v in twelve_lead.positions("biv").items()}
    x = [pos[f"C{i}"][0] for i in range(1, 7)]
    assert x[0] > 1.8 and all(a > b for a, b in zip(x, x[1:])) and x[-1] < -1.0    # RV side (+x) to the LV's
    assert pos["LL"][2] < -4.0                              # below the apex (z = -2)
    assert pos["RA"][2] > 2.0                               # above the base (z = 0.5), on the RV's side
    # outside the idealised BiV (cardiosim.domain.anatomy: the LV's epicardium and the RV's outer ellipsoid)
    for name, p in pos.items():
        lv = (p[0] / 1.0) ** 2 + (p[1] / 1.0) ** 2 + (p[2] / 2.0) ** 2
        rv = ((p[0] - 0.4) / 1.4) ** 2 + (p[1] / 1.6) ** 2 + (p[2] / 1.8) ** 2
        assert p[2] > 0.5 or (lv > 1.2 and rv > 1.2), name
    lv_pos = twelve_lead.positions("lv")
    assert np.allclose(np.array(lv_pos["C1"]) - twelve_lead.CENTRE["lv"], pos["C1"] - CENTRE)


RUN = """
[simulation]
equations = "monodomain"
duration = 3.0
dt = 0.05
progress_interval = 0
[grid]
size = [0.4, 0.4, 0.4]
spacing = 0.05
origin = {origin}
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = {origin}
upper = {upper}
duration = 1.0
current_density = -60.0
[ecg]
twelve_lead = "biv"
[output]
interval = 1.0
"""


def test_a_run_writes_inspects_and_plots_twelve_leads(tmp_path):
    cfg = tmp_path / "block.toml"
    lo = [round(float(v), 6) for v in CENTRE - HALF]
    cfg.write_text(RUN.format(origin=lo, upper=[lo[0] + 0.05, lo[1] + 0.4, lo[2] + 0.4]))
    out = tmp_path / "block.h5"
    proc = run_cli(["run", cfg, "--output", out, "--quiet"])
    assert proc.returncode == 0, proc.stderr
    with h5py.File(out) as f:
        e = f["ecg"]
        for name in (*twelve_lead.ELECTRODES, *twelve_lead.TRACES):
            assert name in e, name
        assert e["II"].attrs["lead"] == "LL - RA" and e["V1"].attrs["lead"].startswith("1 C1")
        i, ii, iii = e["I"][:], e["II"][:], e["III"][:]
        assert np.max(np.abs(i + iii - ii)) <= 1e-12 * np.max(np.abs(ii)) and np.max(np.abs(ii)) > 0
    proc = run_cli(["inspect", out])
    assert proc.returncode == 0, proc.stderr
    assert "aVF" in proc.stdout and "V6" in proc.stdout and "lead 1 LL - 0.5 RA - 0.5 LA" in proc.stdout
    proc = run_cli(["plot", out, "--out", tmp_path / "fig"])
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "fig" / "block_ecg12.png").stat().st_size > 10_000


@pytest.mark.parametrize("text,words", [
    ('[grid]\nsize = [1.0, 0.4]\nspacing = 0.02\n[ecg]\ntwelve_lead = "biv"\n', ["ecg.twelve_lead", "3D"]),
    ('[grid]\nsize = [1.0, 0.4]\nspacing = 0.02\n[ecg]\ntwelve_lead = "electrodes"\n[[ecg.electrodes]]\n'
     'name = "RA"\nposition = [0.0, 1.0, 1.0]\n', ["ecg.twelve_lead", "missing", "LA", "C6"]),
    ('[grid]\nsize = [0.4, 0.4, 0.4]\nspacing = 0.05\n[ecg]\ntwelve_lead = "lv"\n[[ecg.leads]]\nname = "II"\n'
     'plus = "LA"\nminus = "RA"\n', ["ecg.twelve_lead", "II", "rename"]),
])
def test_bad_twelve_lead_is_one_line(text, words):
    with pytest.raises(config.ConfigError) as e:
        config.loads("[simulation]\nduration = 1.0\ndt = 0.01\n" + text)
    msg = str(e.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, (w, msg)


def test_qrs_of_a_known_complex():
    """A Gaussian complex of width s in every lead (different signs and sizes): the RMS is the same Gaussian, above
    10 % of its peak for |t - t0| < s·sqrt(2 ln 10); V1's area over the window is its amplitude times that part of
    the Gaussian's integral (erf)."""
    from math import erf, log, pi, sqrt
    t = np.arange(0.0, 100.0, 0.01)
    t0, s = 40.0, 5.0
    g = np.exp(-(t - t0) ** 2 / (2 * s ** 2))
    amp = {n: (-1.0) ** k * (0.5 + 0.1 * k) for k, n in enumerate(twelve_lead.LEADS)}
    leads = {n: a * g for n, a in amp.items()}
    q = twelve_lead.qrs(t, {**leads, "WCT": np.ones_like(t)})
    half = s * sqrt(2 * log(10))
    assert q["onset"] == pytest.approx(t0 - half, abs=0.011) and q["offset"] == pytest.approx(t0 + half, abs=0.011)
    assert q["duration"] == pytest.approx(2 * half, abs=0.022)
    assert q["peak"] == pytest.approx(np.sqrt(np.mean([a ** 2 for a in amp.values()])), rel=1e-9)
    area = twelve_lead.lead_area(t, leads["V1"], q["onset"], q["offset"])
    assert area == pytest.approx(amp["V1"] * s * sqrt(2 * pi) * erf(half / (s * sqrt(2))), rel=1e-3)
    assert twelve_lead.qrs(t, leads, before=t0)["offset"] < t0          # the window cut before the peak's end
    with pytest.raises(ValueError, match="missing V6"):
        twelve_lead.qrs(t, {n: v for n, v in leads.items() if n != "V6"})
