"""`cardiosim cell` as a single-cell tool: integrator choice (Forward Euler, Rush–Larsen, GRL1,
CVODES through Myokit), pre-pacing, parameter scale factors and drug block, traced intermediates (currents),
`model info` for the built-in models; the bad-input lines of these options."""

from __future__ import annotations

import json

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_cvodes, require_gcc, run_cli

pytest.importorskip("myokit")

from cardiosim import cells  # noqa: E402
from cardiosim.single_cell.pacing import block_factor, scaled  # noqa: E402

MODELS = ROOT / "models"
LR91 = MODELS / "luo_rudy_1991.cellml"
ORD = MODELS / "ohara_rudy_2011_endo.cellml"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _beat(tmp_path, name, *args):
    out, js = tmp_path / f"{name}.h5", tmp_path / f"{name}.json"
    run_cli(["cell", "--model", LR91, "--period", "500", "--output", out, "--json", js, *args], check=True,
            env={"CARDIOSIM_CACHE": str(tmp_path / "cache")})
    return json.loads(js.read_text())["beats"], out


def test_integrators_agree_with_cvodes(tmp_path):
    """One Luo–Rudy 1991 beat: Forward Euler (5 µs), Rush–Larsen and GRL1 (10 µs) against CVODES (Myokit; measured:
    V_peak 42.01 mV, APD90 329.2 ms; FE 42.45 / 329.18, GRL1 42.58 / 329.19; at 50 µs Rush–Larsen overshoots the
    peak, 47.2 mV, GRL1 44.6)."""
    require_cvodes()
    require_gcc()
    ref, out = _beat(tmp_path, "cvode", "--integrator", "cvode", "--dt", "0.05")
    with h5py.File(out) as f:
        assert f.attrs["integrator"] == "cvode" and f["trace/t"].shape == (10001,)
    for integrator, dt in (("forward-euler", "0.005"), ("rush-larsen", "0.01"), ("grl1", "0.01")):
        beats, _ = _beat(tmp_path, integrator, "--integrator", integrator, "--dt", dt)
        assert beats[0]["APD90"] == pytest.approx(ref[0]["APD90"], rel=0.01), integrator
        assert beats[0]["V_peak"] == pytest.approx(ref[0]["V_peak"], abs=1.5), integrator    # RL: 43.1


@pytest.mark.slow
def test_prepace_is_the_same_as_pacing_first(tmp_path):
    """--prepace 2 --beats 1 ends where --beats 3 ends (the same pulse train; round-off)."""
    require_gcc()
    _, a = _beat(tmp_path, "pre", "--prepace", "2", "--beats", "1", "--dt", "0.01", "--integrator", "grl1")
    _, b = _beat(tmp_path, "all", "--beats", "3", "--dt", "0.01", "--integrator", "grl1")
    with h5py.File(a) as fa, h5py.File(b) as fb:
        assert fa.attrs["prepace"] == 2
        for name in fa.attrs["state_names"]:
            x, y = fa[f"trace/{name}"][-1], fb[f"trace/{name}"][-1]
            assert x == pytest.approx(y, rel=1e-9, abs=1e-15), name


def test_drug_block_halves_ikr(tmp_path):
    """At a concentration equal to the IC50 (Hill 1) the conductance halves, and so does I_Kr at any state; the run
    records the scaled conductance and the I_Kr trace (µA/µF)."""
    assert block_factor(3.0, 3.0, 1.0) == 0.5 and block_factor(0.0, 3.0, 2.0) == 1.0
    cls = cells.model_class(str(ORD))
    control = cls()
    drug = cls(overrides=scaled(str(ORD), None, {}, {"GKr_b": block_factor(1.5, 1.5)}))
    y = control.initial_state(2)
    y[0] = [-20.0, 10.0]
    y[control.state_index("xrf")] = 0.3
    ratio = drug.values(y, 0.0)["IKr"] / control.values(y, 0.0)["IKr"]
    np.testing.assert_allclose(ratio, 0.5, rtol=1e-12)
    out = tmp_path / "drug.h5"
    run_cli(["cell", "--model", ORD, "--beats", "1", "--period", "50", "--dt", "0.01", "--integrator", "grl1",
             "--block", "GKr_b=1.5", "--concentration", "1.5", "--trace", "IKr", "--trace", "INa", "--output", out],
            check=True)
    with h5py.File(out) as f:
        assert json.loads(f.attrs["overrides"])["GKr_b"] == pytest.approx(0.5 * cls.parameters["GKr_b"].value)
        assert f["trace/IKr"].shape == f["trace/t"].shape and f["trace/INa"][:].min() < -50.0
        assert f["trace/IKr"].attrs["unit"] == "A/F"


def test_model_info_of_a_built_in_model():
    proc = run_cli(["model", "info", "bondarenko"], check=True)
    assert "states (41" in proc.stdout and "variants" in proc.stdout and "apical:" in proc.stdout


@pytest.mark.parametrize("args,words", [
    (["--block", "GKr_b=1"], ["--block", "--concentration"]),
    (["--block", "GKr_b=x", "--concentration", "1"], ["--block", "IC50"]),
    (["--scale", "GKr_b=-1"], ["--scale", "factor"]),
    (["--scale", "nope=2"], ["--scale", "nope", "allowed"]),
    (["--trace", "nope"], ["--trace", "nope", "model info"]),
    (["--prepace", "-1"], ["--prepace"]),
    (["--integrator", "rush-larsen", "--model", "bondarenko"], ["rush-larsen", "bondarenko"]),
    (["--integrator", "cvode", "--model", "tt06"], ["cvode", "tt06"]),
])
def test_bad_input(tmp_path, args, words):
    out = tmp_path / "cell.h5"
    if "--model" not in args:
        args = [*args, "--model", ORD]
    proc = run_cli(["cell", *args, "--output", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()


TISSUE = """
[simulation]
duration = 0.1
dt = 0.01
equations = "monodomain"
progress_interval = 0
[grid]
size = [0.1]
spacing = [0.01]
[cell]
model = "{model}"
initial_state = "paced.h5"
initial = {{ Cai = 0.00021 }}
[output]
interval = 0.1
"""


@pytest.mark.slow
def test_a_paced_state_starts_a_tissue_run(tmp_path):
    """`cardiosim cell --prepace` writes the paced state; `cell.initial_state` (relative to the config) starts every
    cell of a tissue run from it, `cell.initial` overriding single states; a file of another model is one line."""
    require_gcc()
    (tmp_path / "m").mkdir()
    model = tmp_path / "m" / "lr.cellml"
    model.write_bytes(LR91.read_bytes())
    run_cli(["cell", "--model", model, "--prepace", "2", "--beats", "1", "--period", "400", "--dt", "0.01",
             "--integrator", "grl1", "--output", tmp_path / "paced.h5"], check=True)
    with h5py.File(tmp_path / "paced.h5") as f:
        paced = {n: f[f"trace/{n}"][-1] for n in f.attrs["state_names"]}
    (tmp_path / "t.toml").write_text(TISSUE.format(model="m/lr.cellml"))
    run_cli(["run", tmp_path / "t.toml", "--output", tmp_path / "t.h5", "--quiet"], check=True, cwd=tmp_path)
    from cardiosim import config
    cfg = config.load(tmp_path / "t.toml")
    assert cfg.cell.initial_state == str(tmp_path / "paced.h5")
    with h5py.File(tmp_path / "t.h5") as f:
        vm0 = f["fields/Vm"][0]
    np.testing.assert_allclose(vm0, paced["V"], rtol=0, atol=1e-12)
    (tmp_path / "bad.toml").write_text(TISSUE.format(model=str(MODELS / "noble_model_1962.cellml")))
    proc = run_cli(["config", "check", tmp_path / "bad.toml"], cwd=tmp_path)
    assert proc.returncode == 2 and "cell.initial_state" in proc.stderr and "paced the model 'lr'" in proc.stderr, \
        proc.stderr


def test_s1s2_restitution_of_tt06_against_cvodes(tmp_path):
    """S1-S2 restitution of the hand-written TT06 (Rush-Larsen, 20 µs) against CVODES on its CellML file: APD90 of
    the S2 beat at each coupling interval within 1 ms (measured: 307.30 / 307.44, 294.12 / 294.24, 232.34 / 232.43
    ms at CI 1000, 600, 400 after 5 beats), and APD shortening with the diastolic interval."""
    require_cvodes()
    require_gcc()
    args = ["--prepace", "3", "--restitution", "1000,600,400", "--amplitude", "-52", "--duration", "1",
            "--record-every", "0.1"]
    got = {}
    for name, model, integrator, dt in (("hand", "tt06", "rush-larsen", "0.02"),
                                        ("cvode", MODELS / "ten_tusscher_model_2006_epi.cellml", "cvode", "0.1")):
        js = tmp_path / f"{name}.json"
        run_cli(["cell", "--model", model, "--integrator", integrator, "--dt", dt, *args, "--output",
                 tmp_path / f"{name}.h5", "--json", js], check=True)
        got[name] = json.loads(js.read_text())["restitution"]
    for a, b in zip(got["hand"], got["cvode"]):
        assert a["APD90_S2"] == pytest.approx(b["APD90_S2"], abs=1.0), (a, b)
    apd = [r["APD90_S2"] for r in got["hand"]]
    dis = [r["DI"] for r in got["hand"]]
    assert apd[0] > apd[1] > apd[2] > 150.0 and dis[0] > dis[1] > dis[2] > 0.0
    with h5py.File(tmp_path / "hand.h5") as f:
        assert f["restitution"].shape == (3,) and f["trace/V"].shape[0] == 3


CABLE = """
[simulation]
duration = 3.0
dt = 0.01
equations = "monodomain"
progress_interval = 0
[grid]
size = [0.1]
spacing = [0.01]
[cell]
model = "{model}"
integrator = "grl1"
{cell}
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.02]
duration = 1.0
current_density = -80.0
[output]
interval = 0.5
"""


def test_cell_scale_in_a_tissue_run(tmp_path):
    """cell.scale = {g_Na = 0.5} is the same run, bit for bit, as cell.parameters = {g_Na = half the default};
    an unknown name or a negative factor is one line, exit 2."""
    require_gcc()
    g_na = cells.model_class(str(LR91)).parameters["g_Na"].value
    runs = {}
    for name, cell in (("scale", "scale = { g_Na = 0.5 }"), ("param", f"parameters = {{ g_Na = {0.5 * g_na!r} }}")):
        (tmp_path / f"{name}.toml").write_text(CABLE.format(model=LR91, cell=cell))
        run_cli(["run", tmp_path / f"{name}.toml", "--output", tmp_path / f"{name}.h5", "--quiet"], check=True)
        with h5py.File(tmp_path / f"{name}.h5") as f:
            runs[name] = f["fields/Vm"][:]
    np.testing.assert_array_equal(runs["scale"], runs["param"])
    for bad, words in (("scale = { g_Nope = 0.5 }", "cell.scale.g_Nope"), ("scale = { g_Na = -1.0 }", ">= 0")):
        (tmp_path / "bad.toml").write_text(CABLE.format(model=LR91, cell=bad))
        proc = run_cli(["config", "check", tmp_path / "bad.toml"])
        assert proc.returncode == 2 and words in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
