"""``cardiosim inspect`` and ``cardiosim plot`` of the files of ``cardiosim cell`` (a paced trace, a restitution, a
population, a concentration-response series), made here by ``cardiosim cell`` (tt06, Rush–Larsen, short runs):
the reports state the files' numbers, the figures hold them (captured as they are saved) and pass the layout checks
of tests/test_figures.py, a concentration series equals the single runs at its concentrations, what was never
written is refused in one line, neither command loads MPI or PETSc, and the commands of
docs/user/output-format.md run as written."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli
from test_figures import _colorbars, captured, check_layout, plot  # noqa: F401 - captured is a fixture

TT06 = ["--model", "tt06", "--integrator", "rush-larsen", "--dt", "0.02", "--period", "400", "--quiet"]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("cell")
    runs = {
        "trace": ["--beats", "2", "--record-every", "0.1"],
        "restitution": ["--prepace", "1", "--restitution", "250,300,350", "--record-every", "0.5"],
        "population": ["--population", "16", "--sample", "g_Kr=lognormal:0.3", "--keep", "APD90=240:290",
                       "--record-every", "0.5"],
        "drug": ["--beats", "2", "--block", "g_Kr=0.1", "--concentration", "0,0.1,1", "--record-every", "0.5",
                 "--json", d / "drug.json"],
    }
    for name, extra in runs.items():
        run_cli(["cell", *TT06, *extra, "--output", d / f"{name}.h5"], check=True, timeout=120)
    return {name: d / f"{name}.h5" for name in runs}


def inspect(path, *extra):
    return run_cli(["inspect", path, *extra])


def test_inspect_trace(files):
    text = inspect(files["trace"]).stdout
    with h5py.File(files["trace"]) as f:
        v, bio = f["trace/V"][:], f["biomarkers"][()]
    assert "a paced single-cell trace of cardiosim cell" in text and "model: tt06 (epi)" in text
    assert "2 beat(s) recorded; rush-larsen, dt 0.02 ms; records every 0.1 ms" in text
    assert "trace: 8001 samples, t = 0 to 800 ms" in text
    assert re.search(rf"^  V\s+{v.min():.4g} to {v.max():.4g} mV$", text, re.M)
    assert re.search(r"^  Ca_i\s+\S+ to \S+ mM$", text, re.M)
    for r in bio:
        assert re.search(rf"^\s+{r['beat']}\s+{r['V_rest']:.5g}\s+{r['V_peak']:.5g}\s+{r['dVdt_max']:.5g}\s+"
                         rf"{r['APD50']:.5g}\s+{r['APD90']:.5g}$", text, re.M), text
    proc = inspect(files["trace"], "--config")
    assert proc.returncode == 2 and "has no config" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_plot_trace(files, tmp_path, captured):
    assert plot(files["trace"], tmp_path, "--trace", "Ca_i", "Xr1") == 0
    fig = captured["trace_trace.png"]
    check_layout(fig)
    with h5py.File(files["trace"]) as f:
        t, v, ca = f["trace/t"][:], f["trace/V"][:], f["trace/Ca_i"][:]
    axes = [ax for ax in fig.axes if ax.lines]
    assert [ax.get_ylabel() for ax in axes] == ["V (mV)", "Ca_i (mM)", "Xr1 (1)"]
    np.testing.assert_array_equal(axes[0].lines[0].get_xdata(), t)
    np.testing.assert_array_equal(axes[0].lines[0].get_ydata(), v)
    np.testing.assert_array_equal(axes[1].lines[0].get_ydata(), ca)
    assert axes[-1].get_xlabel() == "t (ms)"
    # default: V and the calcium
    assert plot(files["trace"], tmp_path / "d") == 0
    assert [ax.get_ylabel() for ax in captured["trace_trace.png"].axes if ax.lines] == ["V (mV)", "Ca_i (mM)"]


def test_currents_of_a_cellml_model(tmp_path, captured):
    """A CellML model's recorded intermediates (currents) drawn below V, in their units, as the file holds them."""
    path = tmp_path / "currents.h5"
    run_cli(["cell", *TT06, "--model", ROOT / "models" / "ten_tusscher_model_2006_epi.cellml", "--trace", "i_Kr",
             "--trace", "i_CaL", "--record-every", "0.1", "--output", path], check=True, timeout=300)
    assert plot(path, tmp_path, "--trace", "i_Kr", "i_CaL") == 0
    fig = captured["currents_trace.png"]
    check_layout(fig)
    axes = [ax for ax in fig.axes if ax.lines]
    with h5py.File(path) as f:
        ikr, unit = f["trace/i_Kr"][:], f["trace/i_Kr"].attrs["unit"]
        ical = f["trace/i_CaL"][:]
    assert [ax.get_ylabel() for ax in axes] == ["V (mV)", f"i_Kr ({unit})", f"i_CaL ({unit})"] and unit == "A/F"
    np.testing.assert_array_equal(axes[1].lines[0].get_ydata(), ikr)
    np.testing.assert_array_equal(axes[2].lines[0].get_ydata(), ical)
    assert ical.min() < -1.0 and ikr.max() > 0.1        # inward L-type, outward rapid delayed rectifier


def test_restitution(files, tmp_path, captured):
    with h5py.File(files["restitution"]) as f:
        rows = f["restitution"][()]
        v = f["trace/V"][()]
    ok = rows["captured"] > 0
    assert ok.sum() >= 2 and (~ok).sum() >= 1           # the shortest interval is refractory
    text = inspect(files["restitution"]).stdout
    assert f"restitution: 3 coupling interval(s), {int(ok.sum())} captured" in text
    for r in rows:
        assert f"{r['CI']:15.2f}{r['DI']:15.2f}{r['APD90_S2']:15.2f}" in text
    assert plot(files["restitution"], tmp_path) == 0
    fig = captured["restitution_restitution.png"]
    check_layout(fig)
    di, ci = fig.axes[0], fig.axes[1]
    np.testing.assert_array_equal(di.lines[0].get_xdata(), np.sort(rows["DI"][ok]))
    np.testing.assert_array_equal(di.lines[0].get_ydata(), rows["APD90_S2"][ok][np.argsort(rows["DI"][ok])])
    np.testing.assert_array_equal(ci.lines[0].get_xdata(), np.sort(rows["CI"][ok]))
    missed = [ln for ln in di.lines if ln.get_label() == "S2 not captured"][0]
    np.testing.assert_array_equal(missed.get_xdata(), rows["DI"][~ok])
    assert di.get_xlabel() == "diastolic interval DI (ms)" and di.get_ylabel() == "APD90 (ms)"
    traces = captured["restitution_restitution_traces.png"]
    check_layout(traces)
    assert [ln.get_label() for ln in traces.axes[0].lines] == [f"CI = {c:g}" for c in rows["CI"]]
    np.testing.assert_array_equal(traces.axes[0].lines[1].get_ydata(), v[1])


def test_population(files, tmp_path, captured):
    with h5py.File(files["population"]) as f:
        bio = f["population/biomarkers"][()]
        v = f["trace/V"][()]
    kept, failed = bio["kept"] > 0, bio["failed"] > 0
    assert 0 < kept.sum() < len(bio)                      # the filter keeps some and rejects some
    text = inspect(files["population"]).stdout
    assert (f"population: 16 cells, {int(failed.sum())} failed, {int(kept.sum())} kept by the calibration filter "
            f"(APD90 240 to 290 ms)") in text
    a = bio["APD90"]
    assert (f"APD90    (ms): all {a.min():.4g} to {a.max():.4g} (median {np.median(a):.4g}); kept "
            f"{a[kept].min():.4g}") in text
    assert plot(files["population"], tmp_path) == 0
    fig = captured["population_population.png"]
    check_layout(fig)
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_xlabel() for ax in panels] == ["APD90 (ms)", "APD50 (ms)", "V_rest (mV)", "V_peak (mV)",
                                                  "dVdt_max (mV/ms)"]
    apd = panels[0]
    assert sum(p.get_height() for p in apd.containers[0]) == kept.sum()              # the kept cells, below
    assert sum(p.get_height() for p in apd.containers[1]) == (~kept & ~failed).sum()   # the rejected ones on them
    for k, r in zip(apd.containers[0], apd.containers[1]):       # no bin holds both: the bounds are bin edges
        assert not (k.get_height() > 0 and r.get_height() > 0), (k.get_x(), k.get_width())
    span = [p for p in apd.patches if p.get_label() == "filter range (--keep)"]
    assert len(span) == 1 and np.allclose([span[0].get_x(), span[0].get_x() + span[0].get_width()], [240.0, 290.0])
    assert panels[0].get_ylabel() == "cells (count)"
    traces = captured["population_population_traces.png"]
    check_layout(traces)
    blue = [ln for ln in traces.axes[0].lines if ln.get_color() == "tab:blue"]
    assert len(blue) == kept.sum()
    np.testing.assert_array_equal(blue[0].get_ydata(), v[np.flatnonzero(kept)[0]])


def test_population_of_failed_cells_has_no_histogram(files, tmp_path, capsys):
    path = tmp_path / "failed.h5"
    path.write_bytes(files["population"].read_bytes())
    with h5py.File(path, "r+") as f:
        bio = f["population/biomarkers"][()]
        bio["failed"], bio["kept"] = 1, 0
        f["population/biomarkers"][...] = bio
    from cardiosim.cli import main
    assert main(["plot", str(path), "--out", str(tmp_path)]) == 0
    assert capsys.readouterr().out.splitlines() == ["no picture of population: every cell failed",
                                                    "no picture of population traces: every cell failed"]
    assert not list(tmp_path.glob("*.png"))


def test_concentration_series(files, tmp_path, captured):
    """The series' rows are the single runs at those concentrations (the existing --block --concentration C)."""
    with h5py.File(files["drug"]) as f:
        rows = f["concentration/biomarkers"][()]
        left = f["concentration/factors/g_Kr"][:]
        v = f["trace/V"][()]
        t = f["trace/t"][:]
    np.testing.assert_array_equal(rows["concentration"], [0.0, 0.1, 1.0])
    np.testing.assert_allclose(left, [1.0, 0.5, 1.0 / 11.0], rtol=1e-15)
    single = tmp_path / "single.h5"
    run_cli(["cell", *TT06, "--beats", "2", "--block", "g_Kr=0.1", "--concentration", "0.1", "--record-every", "0.5",
             "--output", single], check=True, timeout=60)
    with h5py.File(single) as f:
        one = f["biomarkers"][()][-1]
        v1 = f["trace/V"][:]
    for col in ("APD90", "APD50", "V_peak", "V_rest", "dVdt_max"):
        assert rows[col][1] == one[col], col
    np.testing.assert_array_equal(v[1], v1[-len(t):])
    assert t[0] == 0.0 and t[-1] == 400.0
    assert rows["APD90"][0] < rows["APD90"][1] < rows["APD90"][2]   # I_Kr block prolongs the action potential
    text = inspect(files["drug"]).stdout
    assert "concentration-response: 3 concentrations (the IC50s' unit); blocks: g_Kr IC50 0.1, Hill 1" in text
    assert f"{0.1:14.4g}{rows['APD90'][1]:18.5g}" in text
    assert '"concentration_response"' in (files["drug"].with_suffix(".json")).read_text()
    assert plot(files["drug"], tmp_path) == 0
    fig = captured["drug_concentration.png"]
    check_layout(fig)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "APD90 (ms)" and ax.get_xlabel() == "concentration (the IC50s' unit)"
    np.testing.assert_array_equal(ax.lines[0].get_ydata(), rows["APD90"])
    assert ax.get_xscale() == "symlog"                 # 0 and a decade of concentrations
    check_layout(captured["drug_concentration_traces.png"])


@pytest.mark.parametrize("args, says", [
    (["--concentration", "0,1"], "a series needs at least one --block"),
    (["--block", "g_Kr=0.1", "--concentration", "0,x"], "expected a concentration >= 0 or a comma-separated list"),
    (["--block", "g_Kr=0.1", "--concentration", "0,-1"], "expected a concentration >= 0"),
    (["--block", "g_Kr=0.1", "--concentration", "0,1", "--restitution", "300"], "not with --restitution"),
    (["--block", "g_Kr=0.1", "--concentration", "0,1", "--population", "4", "--sample", "g_Kr=lognormal:0.1"],
     "not with --restitution, --population"),
])
def test_concentration_mistakes(tmp_path, args, says):
    out = tmp_path / "bad.h5"
    proc = run_cli(["cell", *TT06, *args, "--output", out], timeout=60)
    assert proc.returncode == 2 and says in proc.stderr, proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not out.exists() and not list(tmp_path.iterdir())


def test_a_series_is_replaced_only_with_overwrite(files, tmp_path):
    args = ["cell", *TT06, "--beats", "1", "--block", "g_Kr=0.1", "--concentration", "0,1", "--record-every", "0.5",
            "--output", tmp_path / "s.h5", "--json", tmp_path / "s.json"]
    run_cli(args, check=True, timeout=60)
    proc = run_cli(args, timeout=60)
    assert proc.returncode == 2 and "exists; pass --overwrite" in proc.stderr
    run_cli([*args, "--overwrite"], check=True, timeout=60)     # recognised as cardiosim cell's, HDF5 and JSON


def test_a_trace_that_stopped_early_says_so(files, tmp_path, captured):
    path = tmp_path / "stopped.h5"
    path.write_bytes(files["trace"].read_bytes())
    with h5py.File(path, "r+") as f:
        f.attrs["error"] = "tt06: cell 0, state V = nan mV is not finite at t = 700 ms"
    text = inspect(path).stdout
    assert "stopped early: tt06: cell 0, state V = nan mV is not finite at t = 700 ms" in text
    assert plot(path, tmp_path) == 0
    assert captured["stopped_trace.png"].get_suptitle().endswith("stopped early")


def test_what_was_never_written_is_refused(files, tmp_path, capsys):
    from cardiosim.cli import main
    out = tmp_path / "figs"
    for path, extra, says in (
            (files["trace"], ["--trace", "no_such"], "--trace no_such: not in"),
            (files["restitution"], ["--trace", "Ca_i"], "--trace: for a paced single-cell trace"),
            (files["population"], ["--times", "10"], "--times: for the result files of cardiosim run"),
            (files["trace"], ["--field", "phi_e"], "--field: for the result files of cardiosim run"),
            (files["drug"], ["--movie", "--fps", "5"], "--movie: for the result files of cardiosim run"),
            (files["drug"], ["--fps", "5"], "--fps: for the result files of cardiosim run")):
        assert main(["plot", str(path), "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err
        assert says in err and len(err.strip().splitlines()) == 1, err
    empty = tmp_path / "empty.h5"
    empty.write_bytes(files["trace"].read_bytes())
    with h5py.File(empty, "r+") as f:              # a run stopped before its first block of records was written
        for name in f["trace"]:
            f["trace"][name].resize((0,))
        del f["biomarkers"]
    assert main(["plot", str(empty), "--out", str(out)]) == 2
    assert "holds no trace sample" in capsys.readouterr().err
    assert main(["inspect", str(empty)]) == 0
    text = capsys.readouterr().out
    assert "trace: no sample written" in text
    assert not out.exists()


def test_neither_loads_mpi_nor_petsc(files, tmp_path):
    code = (f"import sys; from cardiosim.cli import main; "
            + "".join(f"assert main(['inspect', {str(p)!r}]) == 0; "
                      f"assert main(['plot', {str(p)!r}, '--out', {str(tmp_path)!r}]) == 0; " for p in files.values())
            + "bad = [m for m in ('mpi4py', 'petsc4py') if m in sys.modules]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_documented_commands_run(tmp_path):
    """The ```sh block of docs/user/output-format.md's section on cardiosim cell's files, as written."""
    text = (ROOT / "docs" / "user" / "output-format.md").read_text()
    start = text.index("## Files of `cardiosim cell`")
    block = re.search(r"```sh\n(.*?)```", text[start:], re.S).group(1)
    (tmp_path / "models").symlink_to(ROOT / "models")          # the commands run from the repository's root
    for line in block.strip().splitlines():
        argv = shlex.split(line)
        assert argv[0] == ".venv/bin/cardiosim", line
        proc = run_cli(argv[1:], cwd=tmp_path, timeout=120)
        assert proc.returncode == 0, f"{line}\n{proc.stderr}"
    assert len(list((tmp_path / "out" / "cell").glob("*.png"))) == 8
