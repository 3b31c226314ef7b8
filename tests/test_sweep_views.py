"""What a sweep shows without a script of one's own: the figure of a collected quantity against a varied key
(``--plot Q --against KEY``, ``api.sweep(...).plot``), the conduction velocity of each beat between two probes
(``cv.FROM.TO.K``), keys linked to the varied ones (``--link``), the varied values as the types they were given, and
the progress line's labelled time."""

from __future__ import annotations

import csv
import math

import h5py
import numpy as np
import pytest

from conftest import ROOT, run_cli
from test_bad_input import assert_one_line
from test_figures import captured, check_layout  # noqa: F401  (captured: a fixture)

CABLE = ROOT / "tests" / "configs" / "cable.toml"
# The cable with two probes 0.4 cm apart, cells with a short action potential (APD90 ~ 80 ms, as
# run/s1s2-restitution.toml), so that two beats fit in a few hundred ms; dt 0.1 ms (two ODE substeps) to keep it quick.
TWO_PROBES = ['probe=[{name = "a", position = [0.3]}, {name = "b", position = [0.7]}]',
              "cell.parameters={tau_close = 35.0, tau_open = 60.0}", "simulation.dt=0.1",
              "simulation.ode_substeps=2", "output.interval=10.0"]


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def _run(tmp_path, name, *sets):
    out = tmp_path / f"{name}.h5"
    args = ["run", CABLE, "--quiet", "--output", out]
    for s in (*TWO_PROBES, *sets):
        args += ["--set", s]
    run_cli(args, cwd=tmp_path, check=True)
    return out


# -- cv.FROM.TO.K: the conduction velocity of each beat ----------------------------------------------------------
def test_cv_beats_pairs_each_beat_with_the_next_activation_downstream():
    """Beat k at the first point with the second point's first activation after it and before beat k + 1: a beat
    blocked on the way is NaN and does not shift the others; 0.4 cm in 10 ms is 0.4 m/s."""
    from cardiosim.analysis.maps import cv_beats
    np.testing.assert_allclose(cv_beats([10.0, 210.0], [20.0, 230.0], 0.4), [0.4, 0.2])
    blocked = cv_beats([10.0, 110.0, 210.0], [20.0, 220.0], 0.4)           # beat 2 never reaches the second
    assert blocked[0] == pytest.approx(0.4) and math.isnan(blocked[1]) and blocked[2] == pytest.approx(0.4)
    assert np.isnan(cv_beats([10.0], [], 0.4)).all() and np.isnan(cv_beats([10.0], [5.0], 0.4)).all()


def test_cv_of_one_beat_between_two_probes_is_the_tissue_cv(tmp_path):
    """A single beat along the cable: cv.a.b.1 (probe traces, every PDE step) is the median local CV of the
    activation map (``cv``) and the CV along the line between the probes (Results.cv_along) within 1 %; there is
    no beat 2."""
    from cardiosim.output.results import Results
    from cardiosim.simulation.sweep import collect
    path = _run(tmp_path, "one", "simulation.duration=40")
    row = collect(path, ["cv", "cv.a.b.1", "cv.a.b.2", "cv.a.b.last"])
    with Results(path) as r:
        along = r.cv_along([0.3], [0.7])
    assert 0.2 < row["cv"] < 0.7                                     # m/s, a healthy cable
    assert row["cv.a.b.1"] == pytest.approx(row["cv"], rel=0.01)
    assert row["cv.a.b.1"] == pytest.approx(along, rel=0.01)
    assert math.isnan(row["cv.a.b.2"]) and row["cv.a.b.last"] == row["cv.a.b.1"]


def test_cv_of_two_beats_lists_both(tmp_path):
    """Two S1 beats 150 ms apart: both listed, each the probes' distance over the time between the beat's
    activations there; the second, started at a short diastolic interval, is slower (CV restitution)."""
    from cardiosim.output.results import Results
    from cardiosim.simulation.sweep import collect
    path = _run(tmp_path, "two", "simulation.duration=300", "stimulus.0.period=150", "stimulus.0.count=2")
    with Results(path) as r:
        cv = r.cv_beats("a", "b")
        a, b = r.beats("a")["activation"], r.beats("b")["activation"]
    assert len(cv) == 2 and np.isfinite(cv).all()
    np.testing.assert_allclose(cv, 10 * 0.4 / (b - a), rtol=1e-12)
    assert cv[1] < cv[0]
    row = collect(path, ["cv.a.b.1", "cv.a.b.2", "cv.a.b.last"])
    assert [row["cv.a.b.1"], row["cv.a.b.2"]] == list(cv) and row["cv.a.b.last"] == cv[1]


# -- the figure of a table ---------------------------------------------------------------------------------------
def test_figure_of_a_table(tmp_path, captured):  # noqa: F811
    """Q against the varied key, a line per value of the other varied key, named in a legend outside the axes with
    its unit; units on both axes; a NaN left out; the points sorted along x; the PNG one cardiosim recognises."""
    from cardiosim.output.sweep_plot import plot_sweep
    from cardiosim.runtime.files import recognise
    rows = [{"run": i, "stimulus.S2.start": s2, "tissue.sigma_il": g, "status": "finished",
             "probe.c.apd.2": (float("nan") if s2 == 120 else 0.1 * s2 + g)}
            for i, (g, s2) in enumerate((g, s2) for g in (1.74, 3) for s2 in (200, 120, 150))]
    units = {"stimulus.S2.start": "ms", "tissue.sigma_il": "mS/cm", "probe.c.apd.2": "ms"}
    path = plot_sweep(rows, "probe.c.apd.2", "stimulus.S2.start", tmp_path / "f.png", units, ["tissue.sigma_il"],
                      "sheet")
    fig = captured[".f.png.part"]                       # written whole: drawn into the temporary name, then renamed
    check_layout(fig)
    ax = fig.axes[0]
    assert ax.get_xlabel() == "stimulus.S2.start (ms)" and ax.get_ylabel() == "probe.c.apd.2 (ms)"
    assert [ln.get_label() for ln in ax.lines] == ["tissue.sigma_il = 1.74 mS/cm", "tissue.sigma_il = 3 mS/cm"]
    np.testing.assert_allclose(ax.lines[0].get_xdata(), [150, 200])
    np.testing.assert_allclose(ax.lines[1].get_ydata(), [18, 23])
    assert recognise(path, "png") and not (tmp_path / ".f.png.part").exists()
    assert plot_sweep([{**r, "probe.c.apd.2": float("nan")} for r in rows], "probe.c.apd.2", "stimulus.S2.start",
                      tmp_path / "g.png", units, ["tissue.sigma_il"], "sheet") is None
    assert not (tmp_path / "g.png").exists()


# -- the whole sweep: --link, --plot, the table's types, the progress line -----------------------------------------
def test_sweep_links_plots_and_keeps_types(tmp_path):
    """CV restitution without a script: the S1 period varied, the duration linked to it (two beats), cv.a.b.2
    against the period, a line per conductivity. The table keeps the values as written (300, not 300.0), every
    run's duration is twice its period, the figure is written beside the table, and each run's line says what
    its time is."""
    out = tmp_path / "sw"
    args = ["sweep", CABLE, "--vary", "stimulus.0.period=150,200", "--vary", "tissue.sigma_il=1.74,3.5",
            "--link", "simulation.duration=2*stimulus.0.period", "--set", "stimulus.0.count=2", "--out", out,
            "--collect", "cv.a.b.1", "cv.a.b.2", "simulated_ms", "--plot", "cv.a.b.2", "--against",
            "stimulus.0.period", "--jobs", "2"]
    for s in TWO_PROBES:
        args += ["--set", s]
    proc = run_cli(args, cwd=tmp_path, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    figure = out / "sweep_cv.a.b.2_vs_stimulus.0.period.png"
    assert f"wrote {figure}" in proc.stdout
    runs = [ln for ln in proc.stdout.splitlines() if ln.startswith("run ")]
    assert len(runs) == 4 and all(" s since the sweep began" in ln for ln in runs), proc.stdout
    rows = _rows(out / "sweep.csv")
    assert list(rows[0])[:5] == ["run", "stimulus.0.period", "tissue.sigma_il", "simulation.duration", "status"]
    assert [(r["stimulus.0.period"], r["tissue.sigma_il"], r["simulation.duration"]) for r in rows] == [
        ("150", "1.74", "300"), ("150", "3.5", "300"), ("200", "1.74", "400"), ("200", "3.5", "400")]
    assert [float(r["simulated_ms"]) for r in rows] == [300.0, 300.0, 400.0, 400.0]
    cv1, cv2 = ([float(r[f"cv.a.b.{k}"]) for r in rows] for k in (1, 2))
    assert all(c2 < c1 for c1, c2 in zip(cv1, cv2))                 # beat 2 slower
    assert cv2[0] < cv2[2] and cv2[1] < cv2[3]                      # the longer the period, the faster beat 2
    assert cv1[1] > cv1[0]                                          # the higher the conductivity, the faster
    from cardiosim.runtime.files import recognise
    assert recognise(figure, "png")
    # again, every run finished: skipped, the table and the figure written again without --overwrite
    again = run_cli(args, cwd=tmp_path, timeout=300)
    assert again.returncode == 0 and again.stdout.count("skipped") == 4 and f"wrote {figure}" in again.stdout


def test_api_sweep_keeps_types_links_and_plots(tmp_path, petsc):
    """api.sweep's rows hold the varied values as given (an int, a float, a str, a bool), the linked key's value
    computed from them, and the result draws its figures (Table.plot) with the schema's units."""
    from cardiosim import api
    rows = api.sweep(CABLE, {"tissue.sigma_il": [3, 1.55], "cell.backend": ["numpy"],
                             "checkpoint.on_signal": [True]}, tmp_path / "s",
                     collect=["cv", "simulated_ms"], overrides=["simulation.dt=0.1"],
                     link={"simulation.duration": "10*tissue.sigma_il"}, plot=["cv"], against="tissue.sigma_il")
    assert [type(r["tissue.sigma_il"]) for r in rows] == [int, float]
    assert rows[0]["cell.backend"] == "numpy" and rows[0]["checkpoint.on_signal"] is True
    assert [r["simulation.duration"] for r in rows] == [30, 15.5] and type(rows[0]["simulation.duration"]) is int
    assert [r["simulated_ms"] for r in rows] == pytest.approx([30.0, 15.5])
    assert rows.units["tissue.sigma_il"] == "mS/cm" and rows.units["simulation.duration"] == "ms"
    assert (tmp_path / "s" / "sweep_cv_vs_tissue.sigma_il.png").exists()
    from cardiosim.runtime.errors import UserError
    with pytest.raises(UserError, match="exists; pass --overwrite"):
        rows.plot("cv", "tissue.sigma_il")
    assert rows.plot("cv", "tissue.sigma_il", overwrite=True) == tmp_path / "s" / "sweep_cv_vs_tissue.sigma_il.png"
    with pytest.raises(UserError, match="--plot qt: not collected"):
        rows.plot("qt", "tissue.sigma_il")
    with h5py.File(tmp_path / "s" / "run-000.h5") as f:
        assert f.attrs["overrides"].count("simulation.duration=30") == 1


def test_link_values():
    """Integer arithmetic stays integer; a whole-number result of a division is an int (an integer key takes it);
    12 significant digits (10*0.1 is 1, not 1.0000000000000002); precedence, parentheses, unary minus."""
    from cardiosim.simulation.sweep import Link
    assert Link("simulation.ode_substeps=0.4/simulation.dt", ["simulation.dt"]).value({"simulation.dt": 0.1}, 0) == 4
    assert type(Link("k=0.4/a", ["a"]).value({"a": 0.1}, 0)) is int
    assert Link("k=10*a", ["a"]).value({"a": 0.1}, 0) == 1 and Link("k=a/3", ["a"]).value({"a": 1}, 0) == 0.333333333333
    assert Link("k=-(a + 1) * 2 - 6 / 4", ["a"]).value({"a": 2}, 0) == -7.5
    assert Link("k=2*stimulus.0.start+1e1", ["stimulus.0.start"]).value({"stimulus.0.start": 5}, 0) == 20


# -- mistakes up front: one line, exit 2, nothing run or written ----------------------------------------------------
@pytest.mark.parametrize("extra, says", [
    (["--plot", "qt", "--against", "tissue.sigma_il"], ["--plot qt: not collected", "add it to --collect"]),
    (["--collect", "cv", "--plot", "cv", "--against", "simulation.dt"],
     ["--against simulation.dt: neither a varied key (tissue.sigma_il)", "nor a collected quantity"]),
    (["--collect", "cv", "--plot", "cv"], ["--plot cv: give --against KEY"]),
    (["--against", "tissue.sigma_il"], ["--against tissue.sigma_il", "give --plot Q as well"]),
    (["--link", "simulation.duration=10*stimulus.0.period"],
     ["--link simulation.duration=10*stimulus.0.period", "stimulus.0.period is not a varied key"]),
    (["--link", "simulation.duration=10**tissue.sigma_il"], ["--link", "unexpected '*'"]),
    (["--link", "simulation.duration=__import__('os')"], ["--link", "is not a number, + - * /, a parenthesis"]),
    (["--link", "simulation.duration=__import__(2)"], ["--link", "unexpected '('"]),
    (["--link", "tissue.sigma_il=2*tissue.sigma_il"], ["tissue.sigma_il is varied (--vary)"]),
    (["--link", "simulation.duration=tissue.sigma_il/0"], ["divides by zero in run 0"]),
    (["--link", "simulation.duration=2*tissue.sigma_il", "--set", "simulation.duration=3"],
     ["simulation.duration is given with --set too"]),
    (["--link", "simulation.durationx=2*tissue.sigma_il"], ["run 0", "simulation.durationx"]),
    (["--collect", "cv.mid.nowhere.1"], ["--collect cv.mid.nowhere.1", "names no two probes", "probes: mid"]),
])
def test_sweep_view_mistakes_are_one_line(tmp_path, extra, says):
    out = tmp_path / "sw"
    proc = run_cli(["sweep", CABLE, "--vary", "tissue.sigma_il=1,2", "--out", out, *extra], cwd=tmp_path)
    assert_one_line(proc, " ".join(extra), says)
    assert not out.exists()


def test_a_file_not_drawn_by_cardiosim_is_not_replaced(tmp_path):
    """--collect-only replaces the table and its figures, but only files cardiosim wrote as such: a file of the
    user's at the figure's name is refused in one line and left as it was."""
    out = tmp_path / "sw"
    run_cli(["sweep", CABLE, "--vary", "tissue.sigma_il=1,2", "--set", "simulation.duration=3", "--out", out,
             "--quiet", "--collect", "cv"], cwd=tmp_path, check=True)
    mine = out / "sweep_cv_vs_tissue.sigma_il.png"
    mine.write_text("my notes\n")
    proc = run_cli(["sweep", CABLE, "--vary", "tissue.sigma_il=1,2", "--set", "simulation.duration=3", "--out", out,
                    "--collect-only", "--collect", "cv", "--plot", "cv", "--against", "tissue.sigma_il"], cwd=tmp_path)
    assert_one_line(proc, "foreign figure", ["--plot", str(mine), "is not a PNG drawn by cardiosim plot"])
    assert mine.read_text() == "my notes\n"
    mine.unlink()
    again = run_cli(["sweep", CABLE, "--vary", "tissue.sigma_il=1,2", "--set", "simulation.duration=3", "--out", out,
                     "--collect-only", "--collect", "cv", "--plot", "cv", "--against", "tissue.sigma_il"],
                    cwd=tmp_path)
    assert again.returncode == 0 and f"wrote {mine}" in again.stdout, again.stdout + again.stderr


def test_table_keeps_the_types_as_written(tmp_path):
    """CSV: 130 stays 130, 130.0 stays 130.0, true stays true; HDF5: a column of ints is ints, of bools bools."""
    from cardiosim.simulation.sweep import table, toml_value, write_table
    runs = [["a=130", "b=130.0", "c=true", "d=tt06"], ["a=150", "b=0.1", "c=false", "d=\"ms\""]]
    rows = table(tmp_path, runs, ["a", "b", "c", "d"], [], {})
    assert [type(rows[0][k]) for k in "abcd"] == [int, float, bool, str] and rows[1]["d"] == "ms"
    write_table(tmp_path / "t.csv", rows)
    back = _rows(tmp_path / "t.csv")
    assert [back[0][k] for k in "abcd"] == ["130", "130.0", "true", "tt06"]
    assert [toml_value(back[1][k]) for k in "abc"] == [150, 0.1, False]
    write_table(tmp_path / "t.h5", rows)
    with h5py.File(tmp_path / "t.h5") as f:
        assert f["a"].dtype.kind == "i" and f["b"].dtype.kind == "f" and f["c"].dtype == bool


def test_which_keys_make_the_lines():
    """Against a varied key: the other varied keys; against a linked key: the varied keys it is not computed from;
    against a collected quantity: every varied key but the first, which traces each curve."""
    from pathlib import Path
    from cardiosim.simulation.sweep import parse_links, plot_targets
    vary = [("stimulus.S1.period", ["150", "200"]), ("tissue.sigma_il", ["1", "2"])]
    links = parse_links(["simulation.duration=2*stimulus.S1.period"], vary)
    runs = [["stimulus.S1.period=150", "tissue.sigma_il=1", "simulation.duration=300"]]
    lines = {k: plot_targets(["cv"], k, vary, links, ["cv", "probe.p.di.2"], Path("t/sweep.csv"), runs).lines
             for k in ("tissue.sigma_il", "simulation.duration", "probe.p.di.2")}
    assert lines == {"tissue.sigma_il": ["stimulus.S1.period"], "simulation.duration": ["tissue.sigma_il"],
                     "probe.p.di.2": ["tissue.sigma_il"]}
    plots = plot_targets(["cv"], "tissue.sigma_il", vary, links, ["cv"], Path("t/sweep.h5"), runs)
    assert plots.figures == [("cv", Path("t/sweep_cv_vs_tissue.sigma_il.png"))]


def test_words_along_x_are_categories(tmp_path, captured):  # noqa: F811
    """A varied key of words (cell.model): a tick per word, in the table's order."""
    from cardiosim.output.sweep_plot import plot_sweep
    rows = [{"run": i, "cell.model": m, "cv": v} for i, (m, v) in enumerate((("tt06", 0.6), ("mitchell-schaeffer",
                                                                                         0.4)))]
    plot_sweep(rows, "cv", "cell.model", tmp_path / "w.png", {"cv": "m/s"}, [], "sheet")
    ax = captured[".w.png.part"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["tt06", "mitchell-schaeffer"]
    np.testing.assert_allclose(ax.lines[0].get_ydata(), [0.6, 0.4])
    assert ax.get_legend() is None
