"""From one run to a study: --set into table arrays and the effective config in the output, the end-of-run
checks (and --strict), config check listing every mistake, inspect's wording, multi-beat and conduction-velocity
analysis, the Python API, and sweeps (the CLI's and the API's give the same table)."""

from __future__ import annotations

import csv
import json
import math
import re

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli

CABLE = ROOT / "tests" / "configs" / "cable.toml"
SHEET = ROOT / "tests" / "configs" / "sheet.toml"
RESTITUTION = ROOT / "run" / "s1s2-restitution.toml"


# -- the config: TOML written back, --set into table arrays, every mistake ----------------------------------------
@pytest.mark.parametrize("path", sorted((ROOT / "run").rglob("*.toml")) + sorted((ROOT / "tests" / "configs").glob(
    "*.toml")), ids=lambda p: p.name)
def test_toml_written_back_reads_the_same(path):
    from cardiosim.config import tomlwrite
    from cardiosim.config import tomllib
    data = tomllib.loads(path.read_text())
    assert tomllib.loads(tomlwrite.dumps(data)) == data


def test_toml_awkward_values():
    from cardiosim.config import tomlwrite
    from cardiosim.config import tomllib
    data = {"s": 'q"uote\n\\', "l": [[1, 2], [3.5]], "x.y": 1, "b": True, "e": {},
            "ecg": {"leads": [{"name": "aVR", "weights": {"RA": 1.0, "LA": -0.5}}, {"name": "I", "plus": "LA"}]}}
    assert tomllib.loads(tomlwrite.dumps(data)) == data


def test_set_reaches_table_arrays_by_index_and_name():
    from cardiosim import config
    cfg = config.load(RESTITUTION, ["stimulus.S2.start=200", "stimulus.0.current_density=-30",
                                    "probe.centre.position=[0.4, 0.1]"])
    assert cfg.stimulus[1].start == 200.0 and cfg.stimulus[0].current_density == -30.0
    assert cfg.probe[0].position == [0.4, 0.1]
    assert cfg.overrides[0] == "stimulus.S2.start=200"
    eff = config.tomllib.loads(cfg.effective_text)
    assert eff["stimulus"][1]["start"] == 200 and eff["probe"][0]["position"] == [0.4, 0.1]
    # the effective text is itself the config that ran
    again = config.loads(cfg.effective_text)
    assert again.stimulus[1].start == 200.0


@pytest.mark.parametrize("override, says", [
    ("stimulus.S3.start=1", "stimulus has no entry named 'S3'; names: S1, S2"),
    ("stimulus.2.start=1", "stimulus has 2 entries (0 to 1); got index 2"),
    ("stimulus.start=1", "stimulus is a table array; name one of its entries"),
])
def test_set_into_table_arrays_mistakes(override, says):
    from cardiosim import config
    with pytest.raises(config.ConfigError) as e:
        config.load(RESTITUTION, [override])
    assert says in str(e.value) and "\n" not in str(e.value)


BAD = """[simulation]
duration = -5.0
dt = 0.05
progres_interval = 0
[grid]
size = [1.0]
spacing = 0.05
[cell]
backend = "gpu"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [0.1]
start = -1
current_density = -30.0
"""


def test_config_check_lists_every_mistake(tmp_path):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(BAD)
    proc = run_cli(["config", "check", cfg])
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert [ln.split(":")[2].strip() for ln in lines] == ["simulation.progres_interval", "simulation.duration",
                                                           "cell.backend", "stimulus[0].start"], lines
    assert all(ln.startswith("cardiosim: error: ") for ln in lines) and "Traceback" not in proc.stderr
    ok = run_cli(["config", "check", CABLE])
    assert ok.returncode == 0 and "ok" in ok.stdout


def test_help_lists_every_command():
    proc = run_cli(["--help"])
    for cmd in ("run", "cell", "model", "kernels", "inspect", "plot", "geometry", "sweep", "bench", "config"):
        assert f"    {cmd} " in proc.stdout, cmd


# -- the checks ------------------------------------------------------------------------------------------------
class Limits:
    min_activated, min_velocity, max_qrs = 0.95, 0.1, 120.0


def planar(speed_m_s=0.5, nx=41, ny=11, h=0.05):
    """A planar wave from x = 0: T = x / v (ms), on an nx x ny grid of spacing h (cm)."""
    axes = [np.arange(nx) * h, np.arange(ny) * h]
    act = np.broadcast_to(axes[0] / (speed_m_s / 10.0), (ny, nx)).copy()
    return act, axes


def test_checks_pass_a_healthy_wave():
    from cardiosim.analysis.checks import findings
    act, axes = planar()
    assert findings(act, axes, None, Limits, {"p": 1.0}, has_ecg=True) == []


def test_checks_flag_a_wave_that_stops():
    from cardiosim.analysis.checks import findings
    act, axes = planar()
    act[:, 20:] = np.nan                                   # the wave dies half way
    found = findings(act, axes, None, Limits, {"far": float("nan")})
    assert any("220 of 451 tissue nodes activated (48.8 %" in f for f in found), found
    assert any("did not reach the far side" in f for f in found), found
    assert any("probe far: its node never activated" in f for f in found), found


def test_checks_count_the_tissue_not_the_box():
    from cardiosim.analysis.checks import findings
    act, axes = planar()
    tissue = np.zeros(act.shape, bool)
    tissue[:, :20] = True
    act[~tissue] = np.nan                                  # the whole tissue activated, the box around it not
    assert findings(act, axes, tissue, Limits) == []


def test_checks_flag_slow_conduction_and_a_wide_qrs():
    from cardiosim.analysis.checks import findings
    act, axes = planar(speed_m_s=0.05)                     # 2 cm at 5 cm/s: 400 ms
    found = findings(act, axes, None, Limits, has_ecg=True)
    assert any(f.startswith("apparent conduction velocity 0.05 m/s") for f in found), found
    assert any(f.startswith("QRS 400 ms") for f in found), found
    assert not any("QRS" in f for f in findings(act, axes, None, Limits, has_ecg=False))


def test_checks_no_activation_is_one_line():
    from cardiosim.analysis.checks import findings
    act, axes = planar()
    act[:] = np.nan
    assert findings(act, axes, None, Limits, {"p": float("nan")}) == [
        "no tissue node activated (no stimulus, or one too weak or too short to excite)"]


# -- analysis --------------------------------------------------------------------------------------------------
def triangle(t, t0, dur, base=-85.0, peak=20.0):
    v = np.full_like(t, base)
    on = (t >= t0) & (t < t0 + dur)
    v[on] = peak - (peak - base) * (t[on] - t0) / dur
    return v


def test_beats_of_a_known_trace():
    """Two triangular beats: activation = the 0 mV crossing of the sampled upstroke, APD90 from it to 90 %."""
    from cardiosim.analysis.maps import beats
    t = np.arange(0.0, 400.0, 0.1)
    v = np.maximum(triangle(t, 10.0, 200.0), triangle(t, 250.0, 100.0))
    b = beats(t, v)
    assert b["count"] == 2
    up = 85.0 / 105.0 * 0.1                                # the crossing between the sample at -85 and the one at 20
    np.testing.assert_allclose(b["activation"], [9.9 + up, 249.9 + up], atol=1e-9)
    np.testing.assert_allclose(b["apd"], [10 + 180 - 9.9 - up, 250 + 90 - 249.9 - up], atol=1e-9)
    # several nodes at once, one of them never activated: NaN past its beats
    two = beats(t, np.stack([v, np.full_like(t, -85.0)], axis=1))
    assert list(two["count"]) == [2, 0] and np.isnan(two["activation"][:, 1]).all()


def test_conduction_velocity_of_a_planar_wave():
    from cardiosim.analysis.maps import cv_along, cv_map
    act, axes = planar(speed_m_s=0.5)
    np.testing.assert_allclose(cv_map(act, (0.05, 0.05)), 0.5, rtol=1e-12)
    assert cv_along(act, (0.05, 0.05), [0.1, 0.25], [1.9, 0.25]) == pytest.approx(0.5, rel=1e-12)
    # along a diagonal the apparent speed is v / cos(45°)
    assert cv_along(act, (0.05, 0.05), [0.1, 0.0], [0.5, 0.4]) == pytest.approx(0.5 * math.sqrt(2), rel=1e-9)


# -- runs: warnings, --strict, the effective config, inspect ---------------------------------------------------
def test_a_run_that_stops_short_warns_and_strict_fails(tmp_path):
    out = tmp_path / "short.h5"
    proc = run_cli(["run", CABLE, "--quiet", "--output", out, "--strict", "--set", "simulation.duration=4"],
                   cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    warn = [ln for ln in proc.stderr.splitlines() if ln.startswith("cardiosim: warning: ")]
    assert any("tissue nodes activated" in w for w in warn) and any("probe mid" in w for w in warn), proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("cardiosim: error: --strict: the run finished with")
    with h5py.File(out) as f:
        assert f.attrs["status"] == "finished"
        assert len(json.loads(f.attrs["warnings"])) == len(warn)
        assert json.loads(f.attrs["overrides"]) == ["simulation.duration=4"]
        assert "duration = 4\n" in f.attrs["config_effective"]
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["warnings"] == [w[len("cardiosim: warning: "):] for w in warn]
    assert summary["overrides"] == ["simulation.duration=4"]
    shown = run_cli(["inspect", out]).stdout
    assert f"checks: {len(warn)} warning(s)" in shown and "--set simulation.duration=4" in shown
    cfg = run_cli(["inspect", out, "--config"]).stdout
    assert cfg.startswith("# the config as it ran") and "# --set simulation.duration=4" in cfg


def test_a_run_that_crosses_the_tissue_passes_strict(tmp_path):
    out = tmp_path / "long.h5"
    proc = run_cli(["run", CABLE, "--quiet", "--output", out, "--strict", "--set", "simulation.duration=40"],
                   cwd=tmp_path)
    assert proc.returncode == 0 and "warning" not in proc.stderr, proc.stderr
    with h5py.File(out) as f:
        assert json.loads(f.attrs["warnings"]) == []
    assert "checks: nothing implausible found" in run_cli(["inspect", out]).stdout


def test_inspect_says_a_checkpoint_stop_and_shares_of_the_tissue(tmp_path):
    out = tmp_path / "c.h5"
    run_cli(["run", CABLE, "--quiet", "--output", out, "--set", "simulation.duration=40"], cwd=tmp_path, check=True)
    with h5py.File(out, "r+") as f:
        f.attrs["status"] = "stopped"
        f.attrs["stopped_by"] = "checkpoint"
        tissue = np.zeros(f["maps/activation_time"].shape)
        tissue[:10] = 1.0                                   # 10 of 21 nodes are tissue
        f["maps/tissue"] = tissue
    shown = run_cli(["inspect", out]).stdout
    assert "stopped cleanly at a checkpoint" in shown and "by an error" not in shown
    assert "10 of 10 tissue nodes activated (100.0 %)" in shown, shown
    with h5py.File(out, "r+") as f:
        f.attrs["stopped_by"] = "error"
    assert "stopped early by an error" in run_cli(["inspect", out]).stdout


# -- the Python API and sweeps ---------------------------------------------------------------------------------
def test_api_config_from_a_dict_and_overrides():
    from cardiosim import api
    from cardiosim.config import tomllib
    data = tomllib.loads(CABLE.read_text())
    cfg = api.config(data, {"simulation.duration": 12.5, "probe.mid.position": [0.25]}, name="mine")
    assert cfg.simulation.duration == 12.5 and cfg.probe[0].position == [0.25] and cfg.source_name == "mine"
    assert cfg.overrides == ["simulation.duration=12.5", "probe.mid.position=[0.25]"]
    again = api.config(cfg, {"grid.spacing": 0.1})
    assert again.simulation.duration == 12.5 and again.grid.spacing == [0.1]
    from cardiosim.runtime.errors import UserError
    with pytest.raises(UserError, match="simulation.dt: must be > 0"):
        api.config(data, {"simulation.dt": -1.0})


def test_api_runs_and_reads_arrays(tmp_path, petsc):
    from cardiosim import api
    done = api.run(api.config(CABLE, {"simulation.duration": 40.0}), output=tmp_path / "api.h5")
    assert done.warnings == [] and not done.stopped and done.summary["steps"] == 800
    with done.results() as r:
        act = r.map("activation_time")
        assert act.shape == (21,) and np.isfinite(act).all()
        b = r.beats("mid")
        assert b["count"] == 1 and b["activation"][0] == pytest.approx(act[10], abs=0.05)
        assert 0.2 < r.cv_along([0.2], [0.8]) < 0.7              # m/s, a healthy cable


def _table(path):
    with open(path) as f:
        return list(csv.DictReader(f))


@pytest.mark.slow
def test_s1s2_restitution_sweep_cli_and_api_give_the_same_table(tmp_path, petsc):
    """A whole study: an S1-S2 restitution sweep on a 2D sheet by `cardiosim sweep` and by the API."""
    collect = ["probe.centre.activation.2", "probe.centre.di.2", "probe.centre.apd.2", "probe.centre.beats"]
    proc = run_cli(["sweep", RESTITUTION, "--vary", "stimulus.S2.start=120,150,200", "--set",
                    "simulation.duration=300", "--out", tmp_path / "cli", "--jobs", "2", "--collect", *collect],
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    cli = _table(tmp_path / "cli" / "sweep.csv")
    from cardiosim import api
    rows = api.sweep(RESTITUTION, {"stimulus.S2.start": [120, 150, 200]}, tmp_path / "api", collect,
                     overrides=["simulation.duration=300"])
    api = _table(tmp_path / "api" / "sweep.csv")
    assert cli == api and len(rows) == 3
    beats = [float(r["probe.centre.beats"]) for r in cli]
    assert beats == [1.0, 2.0, 2.0]                          # 120 ms is inside the refractory period
    apd2 = [float(r["probe.centre.apd.2"]) for r in cli]
    di2 = [float(r["probe.centre.di.2"]) for r in cli]
    assert math.isnan(apd2[0]) and di2[1] < di2[2] and apd2[1] < apd2[2]   # restitution: shorter DI, shorter APD
    shown = run_cli(["inspect", tmp_path / "cli" / "run-002.h5"]).stdout    # inspect names every beat at a probe
    m = re.search(r"centre .* 2 beats at [0-9.]+, ([0-9.]+) ms, APD90 [0-9.]+, ([0-9.]+) ms", shown)
    assert m, shown
    assert float(m[1]) == pytest.approx(float(cli[2]["probe.centre.activation.2"]), rel=1e-3)
    assert float(m[2]) == pytest.approx(apd2[2], rel=1e-3)
    for row in cli:
        with h5py.File(tmp_path / "cli" / f"run-{int(row['run']):03d}.h5") as f:
            assert json.loads(f.attrs["overrides"]) == ["simulation.duration=300",
                                                         f"stimulus.S2.start={row['stimulus.S2.start']}"]


def test_sweep_mistakes_are_one_line_and_write_nothing(tmp_path):
    out = tmp_path / "sw"
    for args, says in ((["--vary", "stimulus.S9.start=1,2"], "run 0 (--set stimulus.S9.start=1): --set "),
                       (["--vary", "simulation.dt=0.1,-1"], "run 1 (--set simulation.dt=-1): simulation.dt: must be"),
                       (["--vary", "simulation.dt=0.1", "--collect", "nonsense"], "--collect nonsense: unknown"),
                       (["--vary", "a=1,2", "--vary", "b=1", "--zip"], "--zip: every --vary needs as many values")):
        proc = run_cli(["sweep", CABLE, "--out", out, *args], cwd=tmp_path)
        lines = proc.stderr.strip().splitlines()
        assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
        assert not out.exists()


def test_sweep_slurm_writes_a_job_array(tmp_path):
    out = tmp_path / "sw"
    proc = run_cli(["sweep", CABLE, "--vary", "simulation.duration=4,8", "--vary", "tissue.sigma_il=1,2", "--out", out,
                    "--slurm", "--np", "4"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    script = (out / "sweep.sbatch").read_text()
    assert "#SBATCH --array=0-3" in script and "#SBATCH --ntasks=4" in script and " -m cardiosim run " in script
    plan = json.loads((out / "sweep.json").read_text())
    assert plan["runs"][3] == ["simulation.duration=8", "tissue.sigma_il=2"]
    again = run_cli(["sweep", CABLE, "--vary", "simulation.duration=4,8", "--out", out, "--slurm"], cwd=tmp_path)
    assert again.returncode == 2 and "exists" in again.stderr
    # the job script as SLURM would run task 3 of the array (srun: the command itself), then the table collected
    import os
    import subprocess
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "srun").write_text('#!/bin/sh\nexec "$@"\n')
    (fake / "srun").chmod(0o755)
    env = dict(os.environ, SLURM_ARRAY_TASK_ID="3", PATH=f"{fake}{os.pathsep}{os.environ['PATH']}")
    job = subprocess.run(["bash", out / "sweep.sbatch"], env=env, capture_output=True, text=True, timeout=300)
    assert job.returncode == 0, job.stderr
    with h5py.File(out / "run-003.h5") as f:
        assert json.loads(f.attrs["overrides"]) == ["simulation.duration=8", "tissue.sigma_il=2"]
    collect = run_cli(["sweep", CABLE, "--vary", "simulation.duration=4,8", "--vary", "tissue.sigma_il=1,2", "--out",
                       out, "--collect-only", "--collect", "simulated_ms"], cwd=tmp_path)
    assert collect.returncode == 3, collect.stderr                  # three runs missing
    rows = _table(out / "sweep.csv")
    assert [r["status"] for r in rows] == ["missing"] * 3 + ["finished"] and rows[3]["simulated_ms"] == "8.0"


def test_sweep_values():
    from cardiosim.simulation.sweep import split_values
    assert split_values("1,2.5,[1,2],\"a,b\"") == ["1", "2.5", "[1,2]", "\"a,b\""]
    assert split_values("130:250:20") == ["130", "150", "170", "190", "210", "230", "250"]
    assert split_values("0.1:0.3:0.1") == ["0.1", "0.2", "0.3"]


# -- output.states: any cell state in snapshots and probes ---------------------------------------------------------
def test_states_in_snapshots_and_probes(tmp_path):
    out = tmp_path / "states.h5"
    run_cli(["run", CABLE, "--quiet", "--output", out, "--set", 'output.states=["h"]', "--set",
             "simulation.duration=20"], cwd=tmp_path, check=True)
    with h5py.File(out) as f:
        t, h, units = f["fields/time"][:], f["fields/h"][:], f["fields/h"].attrs["units"]
        pt, ph = f["probes/time"][:], f["probes/mid/h"][:]
        node = int(round(f["probes/mid"].attrs["node_position"][0] / 0.05))
        vm = f["probes/mid/Vm"][:]
    assert units == "1" and h.shape == (len(t), 21)
    # the probe's trace is the snapshots' value at its node, at the snapshot times (the same array, every step)
    at = [int(np.argmin(np.abs(pt - x))) for x in t]
    np.testing.assert_array_equal(ph[at], h[:, node])
    # Mitchell-Schaeffer's gate h: 1 at rest, closing once the node has depolarised (above v_gate)
    assert np.all(ph[vm < -80.0][:5] == 1.0) and ph[-1] < 0.99
    from cardiosim.output.results import Results
    with Results(out) as r:
        assert r.fields == ["Vm", "h"] and r.probe("mid")["h"].shape == pt.shape


def test_intermediates_of_a_cellml_model_in_snapshots_and_probes(tmp_path):
    """output.states takes a CellML model's intermediates too (currents: computed from the recorded states by the
    model's own equations, in the model's units, at every node). Checked against TT06's sodium current written out,
    i_Na = g_Na m³ h j (V − E_Na), E_Na = RT/F ln(Na_o/Na_i), from the states recorded beside it, and at rest
    against the model's value at its initial state."""
    from cardiosim import cells
    model = ROOT / "models" / "ten_tusscher_model_2006_epi.cellml"
    out = tmp_path / "currents.h5"
    run_cli(["run", CABLE, "--quiet", "--output", out, "--set", f'cell.model="{model}"', "--set",
             'cell.backend="numpy"', "--set", 'cell.integrator="rush-larsen"', "--set",
             'output.states=["i_Na", "i_K1", "m", "h", "j", "Na_i"]', "--set", "simulation.duration=3", "--set",
             "simulation.dt=0.02", "--set", "output.interval=0.5", "--set", "stimulus.0.current_density=-52"],
            cwd=tmp_path, check=True)
    m = cells.make(str(model))
    p = {k: v.value for k, v in m.parameters.items()}
    rest = m.values(np.array([[st.initial for st in m.states]]).T, 0.0)
    with h5py.File(out) as f:
        d = {k: f[f"fields/{k}"][:] for k in ("Vm", "i_Na", "i_K1", "m", "h", "j", "Na_i")}
        assert f["fields/i_Na"].attrs["units"] == m.intermediate_units()["i_Na"]
        assert np.isfinite(f["probes/mid/i_Na"][:]).all()
    e_na = p["R"] * p["T"] / p["F"] * np.log(p["Na_o"] / d["Na_i"])
    want = p["g_Na"] * d["m"] ** 3 * d["h"] * d["j"] * (d["Vm"] - e_na)
    np.testing.assert_allclose(d["i_Na"], want, rtol=1e-10, atol=1e-12)
    assert d["i_Na"].min() < -1.0                                         # an upstroke is in the record
    np.testing.assert_allclose(d["i_K1"][0], rest["i_K1"][0], rtol=1e-12)  # t = 0: every node at rest


@pytest.mark.parametrize("states, extra, says", [
    ('["V"]', [], "output.states[0]: 'V' is the membrane potential: it is the field Vm; states: h"),
    ('["Cai"]', [], "output.states[0]: 'Cai' is not a state of mitchell-schaeffer; states: h"),
    ('["h", "h"]', [], "output.states[1]: 'h' is listed twice"),
    ('["h"]', ["--set", 'cell.placement="grouped"'], "output.states: needs cell.placement = 'cpu'"),
])
def test_states_mistakes(tmp_path, states, extra, says):
    proc = run_cli(["run", CABLE, "--quiet", "--output", tmp_path / "x.h5", "--set", f"output.states={states}",
                    *extra], cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr
    assert not list(tmp_path.iterdir())


@pytest.mark.mpi
def test_api_under_mpirun(tmp_path):
    """`mpirun -n 2 python script.py`: every rank calls api.run, the run is spread over both, each gets the result."""
    import subprocess
    import sys
    from conftest import require_mpirun
    script = tmp_path / "script.py"
    script.write_text("import sys\nfrom mpi4py import MPI\nfrom cardiosim import api\n"
                      "done = api.run(api.config(sys.argv[1], {'simulation.duration': 4.0}), output=sys.argv[2])\n"
                      "print(MPI.COMM_WORLD.rank, done.summary['layout']['mpi_ranks'], len(done.warnings), "
                      "done.output, flush=True)\n")
    out = tmp_path / "api2.h5"
    proc = subprocess.run([require_mpirun(), "-n", "2", sys.executable, script, SHEET, out], capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = sorted(proc.stdout.split("\n")[:2])
    with h5py.File(out) as f:
        n = len(json.loads(f.attrs["warnings"]))
        assert json.loads(f.attrs["layout"])["mpi_ranks"] == 2
    assert lines == [f"0 2 {n} {out}", f"1 2 {n} {out}"], proc.stdout


def test_beat_maps_agree_with_the_probe_and_are_drawn(tmp_path):
    """Per-beat maps from the snapshots (every 1 ms here) against the probe's every-step beats at its node: within
    the snapshot interval; `cardiosim plot --beats` draws them."""
    out = tmp_path / "s12.h5"
    run_cli(["run", RESTITUTION, "--quiet", "--output", out, "--set", "stimulus.S2.start=180", "--set",
             "simulation.duration=300", "--set", "output.interval=1.0"], cwd=tmp_path, check=True)
    from cardiosim.output.results import Results
    with Results(out) as r:
        maps = r.beat_maps()
        probe = r.beats("centre")
        node = r.probe("centre")["node_position"]
        j, i = (int(round(node[d] / r.spacing[d])) for d in (1, 0))
    assert maps["activation"].shape == (2, 5, 21) and probe["count"] == 2 and (maps["count"] == 2).all()
    np.testing.assert_allclose(maps["activation"][:, j, i], probe["activation"], atol=1.0)
    np.testing.assert_allclose(maps["apd"][:, j, i], probe["apd"], atol=2.0)
    assert (maps["apd"][1] < maps["apd"][0]).all()                 # the premature beat is shorter everywhere
    proc = run_cli(["plot", out, "--out", tmp_path / "fig", "--beats"])
    assert proc.returncode == 0 and (tmp_path / "fig" / "s12_beats.png").stat().st_size > 10_000, proc.stderr
