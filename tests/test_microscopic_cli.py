"""The microscopic model through the command line: bad input, the layout in the output and its picture, the same
layout and run on 1 and 2 ranks, and a restart from a checkpoint."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from conftest import mpirun, needs, run_cli
from test_bad_input import assert_one_line

CONFIG = """
[simulation]
equations = "{equations}"
duration = 2.0
dt = 0.01
progress_interval = 0
[grid]
size = [0.0384, 0.0128]
spacing = 0.0008
[tissue]
model = "microscopic"
[tissue.microscopic]
random_offset = true
seed = 11
junction.noise_cv = 0.3
junction.dropout = 0.1
fibrosis.fraction = 0.1
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.0096, 0.0128]
duration = 2.0
current_density = -300.0
[[probe]]
name = "middle"
position = [0.02, 0.006]
[output]
interval = 0.5
"""


def write(tmp_path, equations="monodomain", text=None):
    p = tmp_path / "micro.toml"
    p.write_text(text or CONFIG.format(equations=equations))
    return p


@pytest.mark.parametrize("case,edit,words", [
    ("layout file of the wrong shape", ('random_offset = true', 'layout_file = "cells.npz"'),
     ["tissue.microscopic.layout_file", "cells.npz", "shape (3, 4)", "(16, 48)"]),
    ("negative junction conductance", ("seed = 11", "seed = 11\nG_p = -0.5"),
     ["tissue.microscopic.G_p", ">= 0", "uS"]),
    ("myocyte smaller than one volume", ("seed = 11", "seed = 11\ncell_length = 0"),
     ["tissue.microscopic.cell_length", ">= 1"]),
    ("missing layout file", ('random_offset = true', 'layout_file = "nowhere.npz"'),
     ["tissue.microscopic.layout_file", "nowhere.npz", "relative to the config file's folder"]),
    ("unknown junction type", ("seed = 11", 'seed = 11\njunction.end = "gap"'),
     ["tissue.microscopic.junction.end", "'gap'", "p, i, c, none"]),
])
def test_bad_input(tmp_path, case, edit, words):
    np.savez(tmp_path / "cells.npz", cell_id=np.zeros((3, 4), dtype=int))
    text = CONFIG.format(equations="monodomain")
    text = text.replace("fibrosis.fraction = 0.1\n", "") if "layout_file" in edit[1] else text
    assert edit[0] in text
    cfg = write(tmp_path, text=text.replace(edit[0], edit[1], 1))
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5"], cwd=tmp_path)
    assert_one_line(proc, case, words)
    assert not (tmp_path / "out.h5").exists()


def test_layout_stored_and_drawn(tmp_path):
    import h5py
    cfg = write(tmp_path)
    run_cli(["run", cfg, "--output", tmp_path / "m.h5"], cwd=tmp_path, check=True)
    with h5py.File(tmp_path / "m.h5") as f:
        t = f["tissue"]
        assert t["cell_id"].shape == (16, 48) and t["face_type_x"].shape == (16, 48)
        assert f["grid"].attrs["shape"].tolist() == [48, 16]
        assert f["grid/x"][0] == pytest.approx(0.0004) and f["grid/x"][-1] == pytest.approx(0.0380)
        assert t.attrs["junction_treatment"] == "direct"
        dead = t["non_conducting"][()].astype(bool)
        assert dead.any()
        act = f["maps/activation_time"][()]
        assert np.all(np.isnan(act[dead]))                      # never stimulated, isolated: never activated
        assert np.isfinite(act[~dead]).mean() > 0.5
    proc = run_cli(["plot", tmp_path / "m.h5"], cwd=tmp_path, check=True)
    assert (tmp_path / "m_layout.png").stat().st_size > 1000, proc.stdout


@pytest.mark.mpi
@pytest.mark.parametrize("equations", ["monodomain", "bidomain"])
def test_two_ranks_and_restart(tmp_path, equations):
    """The layout and the run on 2 ranks are those of 1 rank (the run to solver tolerance: block Jacobi differs by
    rank count); a 2-rank run restarted from its checkpoint is bit-identical to the uninterrupted one."""
    import h5py
    needs("mpi", mpirun() is not None)
    cfg = write(tmp_path, equations)
    one, two = tmp_path / "one.h5", tmp_path / "two.h5"
    tight = ["--", "-parabolic_ksp_rtol", "1e-12"] + (["-elliptic_ksp_rtol", "1e-12"] if equations == "bidomain"
                                                      else [])
    run_cli(["run", cfg, "--output", one, *tight], check=True)
    run_cli(["run", cfg, "--output", two, "--set", "checkpoint.interval=1.0", *tight], np=2, check=True)
    ckpt = tmp_path / "two.ckpt.h5"
    assert ckpt.exists()
    part, part_ckpt = tmp_path / "part.h5", tmp_path / "part.ckpt.h5"
    shutil.copy(two, part)
    shutil.copy(ckpt, part_ckpt)
    run_cli(["run", cfg, "--output", part, "--set", "checkpoint.interval=1.0", "--restart", part_ckpt, *tight],
            np=2, check=True)
    with h5py.File(one) as a, h5py.File(two) as b, h5py.File(part) as c:
        for k in a["tissue"]:
            assert np.array_equal(a["tissue"][k][()], b["tissue"][k][()]), k
            assert np.array_equal(b["tissue"][k][()], c["tissue"][k][()]), k
        va, vb, vc = (f["fields/Vm"][()] for f in (a, b, c))
        assert np.max(np.abs(va - vb)) < 1e-6
        assert np.array_equal(vb, vc)
        ta, tb, tc = (f["maps/activation_time"][()] for f in (a, b, c))
        assert np.array_equal(np.isnan(ta), np.isnan(tb)) and np.nanmax(np.abs(ta - tb)) < 1e-6
        assert np.array_equal(tb, tc, equal_nan=True)


@pytest.mark.mpi
def test_grouped_placement_is_bit_identical(tmp_path):
    """The seed's grouped placement (here with NumPy cells on the group's owner) on the microscopic model equals
    every rank integrating its own cells, bit for bit (2 ranks)."""
    import h5py
    needs("mpi", mpirun() is not None)
    cfg = write(tmp_path)
    outs = {}
    for placement in ("cpu", "grouped"):
        outs[placement] = tmp_path / f"{placement}.h5"
        run_cli(["run", cfg, "--output", outs[placement], "--set", f'cell.placement="{placement}"', "--set",
                 'cell.backend="numpy"'], np=2, check=True)
    with h5py.File(outs["cpu"]) as a, h5py.File(outs["grouped"]) as b:
        assert np.array_equal(a["fields/Vm"][()], b["fields/Vm"][()])
        assert '"grouped"' in b.attrs["layout"]


def test_restart_without_probes(tmp_path):
    """A run with no [[probe]] records no probe samples; its checkpoint used to be refused as inconsistent (it
    expected one sample per step). Restarted, it is bit-identical to the uninterrupted run."""
    import h5py
    text = CONFIG.format(equations="monodomain")
    text = text[:text.index("[[probe]]")] + text[text.index("[output]"):]
    cfg = write(tmp_path, text=text)
    whole, part = tmp_path / "whole.h5", tmp_path / "part.h5"
    run_cli(["run", cfg, "--output", whole, "--set", "checkpoint.interval=1.0"], check=True)
    shutil.copy(whole, part)
    shutil.copy(tmp_path / "whole.ckpt.h5", tmp_path / "part.ckpt.h5")
    run_cli(["run", cfg, "--output", part, "--set", "checkpoint.interval=1.0", "--restart",
             tmp_path / "part.ckpt.h5"], check=True)
    with h5py.File(whole) as a, h5py.File(part) as b:
        assert np.array_equal(a["fields/Vm"][()], b["fields/Vm"][()])


def test_output_layout_is_a_layout_file(tmp_path):
    """A run's output file as tissue.microscopic.layout_file: the same myocytes and face types again (the random
    layout of the first run, fixed), without noise."""
    import h5py
    first = tmp_path / "first.h5"
    text = CONFIG.format(equations="monodomain").replace("junction.noise_cv = 0.3\n", "")
    run_cli(["run", write(tmp_path, text=text), "--output", first], check=True)
    second_text = text.replace("random_offset = true\n", "").replace("fibrosis.fraction = 0.1\n", "").replace(
        "junction.dropout = 0.1\n", "").replace("seed = 11\n", f'layout_file = "{first}"\n')
    (tmp_path / "second.toml").write_text(second_text)
    second = tmp_path / "second.h5"
    run_cli(["run", tmp_path / "second.toml", "--output", second], check=True)
    with h5py.File(first) as a, h5py.File(second) as b:
        assert np.array_equal(a["tissue/non_conducting"][()], b["tissue/non_conducting"][()])
        for k in ("face_type_x", "face_type_y", "face_g_x", "face_g_y"):
            assert np.array_equal(a["tissue"][k][()], b["tissue"][k][()]), k
        assert np.array_equal(a["fields/Vm"][()], b["fields/Vm"][()])
