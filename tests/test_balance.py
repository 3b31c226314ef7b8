"""A masked grid's decomposition balanced by tissue nodes (grid.balance, cardiosim.domain.balance): the idealised LV's
tissue per rank, balanced runs against box-split runs (monodomain and bidomain; PETSc's solvers on the tissue rows
and PCMG on the box; cardiosim's stencil solvers split over the ranks), a checkpoint written balanced on 2 ranks
restarted on 3 and on 1, unmasked grids untouched, a bad value in one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import require_mpirun, run_cli
from test_bad_input import assert_one_line

ROOT = Path(__file__).parent.parent


# --- cardiosim.domain.balance alone -------------------------------------------------------------------------------------

def test_split_balances_a_one_sided_mask():
    """Tissue in the left quarter of a 2D box, 2 and 3 columns of ranks along x: the even split leaves ranks empty,
    the balanced one gives each the same count to within a column of tissue."""
    from cardiosim.domain import balance
    w = np.zeros((17, 65), dtype=np.int64)
    w[:, 2:25] = 1
    for p in (2, 3):
        box = [[65 // p + (j < 65 % p) for j in range(p)], [17]]
        r = balance.split(w, (p, 1), box)
        loads = balance.loads(w, r)
        assert sum(r[0]) == 65 and r[1] == (17,) and min(r[0]) >= 2
        assert loads.sum() == w.sum() and loads.max() - loads.min() <= 17, (r, loads)
        assert balance.loads(w, box).min() == 0


def test_split_keeps_the_multigrid_levels():
    """With PETSc's multigrid levels to keep, every box stays 2 nodes wide on each through PETSc's own coarsening of
    the boxes (cardiosim.domain.balance.coarsened); a dimension where no balanced split can keeps the even split."""
    from cardiosim.domain import balance
    w = np.zeros((17, 65), dtype=np.int64)
    w[:, 30:34] = 1                                 # a band of tissue in the middle: the middle box gets narrow
    box = [[22, 22, 21], [17]]
    for levels in (1, 4):
        r = balance.split(w, (3, 1), box, levels)
        assert r[0] == (31, 2, 32) and balance.keeps(list(r[0]), levels, 2)
        assert list(balance.loads(w, r)) == [17, 34, 17]
    assert balance.split(w, (3, 1), box, 5)[0] == (22, 22, 21)     # 5 levels: no split keeps them


def test_coarsened_follows_the_fine_boxes():
    from cardiosim.domain import balance
    assert balance.coarsened([29, 28]) == [15, 14]
    assert balance.coarsened([31, 26]) == [15, 14]          # within one node of the fine boundary's half
    assert balance.coarsened([24, 14, 19]) == [12, 8, 9]    # as PETSc's DMCoarsen gives (tests/ranks_balance.py)


# --- the idealised LV on 2 and 3 ranks ---------------------------------------------------------------------------

@pytest.fixture(scope="module")
def lv(tmp_path_factory):
    path = tmp_path_factory.mktemp("lv") / "lv.h5"
    run_cli(["geometry", "lv", "--spacing", "0.05", "--out", path], check=True)
    return path


def ranks_balance(n: int, args: list[str]) -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    cmd = [require_mpirun(), "-n", str(n), sys.executable, str(Path(__file__).parent / "ranks_balance.py"), *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}"
    return json.loads([ln for ln in proc.stdout.splitlines() if ln.startswith("{")][-1])


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
def test_lv_tissue_per_rank(lv, n):
    """The LV at 0.05 cm (49 x 49 x 57 nodes, 26,025 tissue): PETSc splits z evenly, 11,641 / 14,384 tissue nodes
    on 2 ranks and 6,029 / 11,188 / 8,808 on 3; balanced, within 5 % of each other (the largest within 2 % of the mean), on PETSc's
    process grid. Each
    rank's mask cut agrees with the counts, PETSc's coarsening of the balanced boxes is cardiosim.domain.balance.coarsened,
    and an unmasked grid keeps PETSc's split whatever grid.balance says."""
    r = ranks_balance(n, ["--labels", str(lv), "--size", "2.4", "2.4", "2.8", "--h", "0.05", "--equations",
                          "bidomain"])
    box, bal = r["box"], r["tissue"]
    print(f"\n{n} ranks: {r['describe']}; boxes {bal['ranges']} (even: {box['ranges']})")
    assert box["balance"] == "box" and bal["balance"] == "tissue"
    assert bal["procs"] == box["procs"] and sum(bal["tissue"]) == sum(box["tissue"]) == 26025
    assert bal["owned"] == bal["tissue"] and box["owned"] == box["tissue"]
    spread = lambda t: (max(t) - min(t)) / (sum(t) / len(t))     # noqa: E731
    assert spread(box["tissue"]) > 0.2
    assert spread(bal["tissue"]) < 0.05                           # z slabs of up to ~500 tissue nodes each
    assert max(bal["tissue"]) < 1.02 * sum(bal["tissue"]) / n      # the largest rank: the step's pace
    assert r["coarsened"]["petsc"] == r["coarsened"]["ours"]
    assert r["unmasked"]["box"] == r["unmasked"]["tissue"] == r["unmasked"]["petsc"]


# --- balanced runs equal box-split runs --------------------------------------------------------------------------

H = 0.01
SHEET = """
[simulation]
equations = "{equations}"
duration = {duration}
dt = 0.01
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [0.64, 0.16]
spacing = {h}
[tissue]
label_file = "labels.npy"
[cell]
model = "mitchell-schaeffer"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.04, 0.16]
duration = 1.0
current_density = -150.0
[output]
interval = 0.5
"""
TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
STENCIL = [a for s in ("parabolic", "elliptic") for a in (
    f"-{s}_ksp_type", "python", f"-{s}_ksp_python_type", "cardiosim.solvers.krylov.StencilCG",
    f"-{s}_pc_type", "python", f"-{s}_pc_python_type", "cardiosim.solvers.multigrid.StencilMG",
    f"-{s}_smg_layout", "ranks", f"-{s}_smg_agglomerate", "64")]
SOLVERS = {   # name: (tissue.solve_on, PETSc options, what the run header's solver line says)
    "petsc-tissue": ("auto", [], "tissue nodes of"),
    "petsc-pcmg": ("box", ["-elliptic_pc_type", "mg"], "cg+mg"),
    "stencil": ("box", STENCIL, "StencilMG (split over"),
}


def sheet(tmp_path, equations, duration=1.0) -> Path:
    """A 65 x 17 node box whose tissue (a third of it: the systems on the tissue rows by default) is on the left:
    PETSc's split along x leaves the right-hand ranks without tissue."""
    lab = np.zeros((17, 65), dtype=np.int16)
    lab[:, 0:23] = 1
    lab[5:12, 23:28] = 2
    np.save(tmp_path / "labels.npy", lab)
    cfg = tmp_path / f"{equations}.toml"
    cfg.write_text(SHEET.format(equations=equations, duration=duration, h=H))
    return cfg


def fields(h5) -> tuple[dict, dict]:
    import h5py
    with h5py.File(h5) as f:
        return ({k: f["fields"][k][:] for k in ("Vm", "phi_e") if k in f["fields"]}, json.loads(f.attrs["layout"]))


def only(equations: str, opts: list[str]) -> list[str]:
    """The options (name, value pairs) of the run's solvers: no -elliptic_* for monodomain."""
    pairs = zip(opts[::2], opts[1::2])
    return [a for k, v in pairs if equations == "bidomain" or not k.startswith("-elliptic_") for a in (k, v)]


@pytest.mark.mpi
@pytest.mark.parametrize("n", [2, 3])
@pytest.mark.parametrize("equations,solvers", [("monodomain", "petsc-tissue"), ("monodomain", "stencil"),
                                               ("bidomain", "petsc-tissue"), ("bidomain", "petsc-pcmg"),
                                               ("bidomain", "stencil")])
@pytest.mark.slow
def test_balanced_run_equals_the_box_split(tmp_path, n, equations, solvers):
    """The same masked run with grid.balance = "box" and "tissue" (the default) agrees within the solver tolerance:
    Vm (and φe) at every snapshot; the balanced boxes hold tissue on every rank, the box split's do not."""
    solve_on, opts, says = SOLVERS[solvers]
    if solvers == "stencil":
        from conftest import require_gcc
        require_gcc()
    cfg = sheet(tmp_path, equations)
    out, layout = {}, {}
    for bal in ("box", "auto"):
        h5 = tmp_path / f"{bal}.h5"
        proc = run_cli(["run", cfg, "--output", h5, "--set", f'grid.balance="{bal}"', "--set",
                        f'tissue.solve_on="{solve_on}"', "--", *only(equations, TIGHT + opts)], np=n)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        header = next(ln for ln in proc.stdout.splitlines() if "rank(s);" in ln)
        assert (says in header) or (equations == "monodomain" and solvers == "stencil" and "StencilCG" in header), \
            header
        assert f"(grid.balance: {'box' if bal == 'box' else 'tissue'}" in proc.stdout
        out[bal], layout[bal] = fields(h5)
    print(f"\n{n} ranks, {equations}, {solvers}: tissue per rank {layout['box']['tissue_per_rank']} (box) -> "
          f"{layout['auto']['tissue_per_rank']} (tissue)")
    assert layout["auto"]["balance"] == "tissue" and layout["box"]["balance"] == "box"
    assert min(layout["box"]["tissue_per_rank"]) == 0 and min(layout["auto"]["tissue_per_rank"]) > 0
    v = out["box"]["Vm"]
    assert np.nanmax(v[-1]) - np.nanmin(v[-1]) > 50                          # a wave
    for k in out["box"]:
        a, b = out["box"][k], out["auto"][k]
        assert np.array_equal(np.isnan(a), np.isnan(b)), k
        d = float(np.nanmax(np.abs(a - b)))
        print(f"  {k}: max |balanced - box split| = {d:.3g} mV")
        assert d < 1e-6 * max(1.0, float(np.nanmax(np.abs(a)))), k


@pytest.mark.mpi
@pytest.mark.slow
def test_checkpoint_written_balanced_resumes_on_three_ranks_and_one(tmp_path):
    """A bidomain run balanced on 2 ranks, checkpointed at 0.5 ms, resumed on 3 ranks (balanced their way), on 1 rank,
    and on 2 ranks split evenly (grid.balance may change at a restart): each agrees with the uninterrupted run
    within the solver tolerance (the checkpoint holds natural-order arrays)."""
    cfg = sheet(tmp_path, "bidomain", duration=2.0)
    common = ["--quiet", "--", *TIGHT]
    whole = tmp_path / "whole.h5"
    run_cli(["run", cfg, "--output", whole, *common], np=2, check=True)
    part = tmp_path / "part.h5"
    run_cli(["run", cfg, "--output", part, "--set", "simulation.duration=1.0", "--set", "checkpoint.interval=0.5",
             *common], np=2, check=True)
    ref, _ = fields(whole)
    for tag, n, extra in (("three", 3, []), ("one", 1, []), ("even", 2, ["--set", 'grid.balance="box"'])):
        out, ckpt = tmp_path / f"{tag}.h5", tmp_path / f"{tag}.ckpt.h5"
        shutil.copy(part, out)
        shutil.copy(tmp_path / "part.ckpt.h5", ckpt)
        proc = run_cli(["run", cfg, "--output", out, "--restart", ckpt, *extra, "--", *TIGHT], np=n)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert n == 1 or f"(grid.balance: {'box' if extra else 'tissue'}" in proc.stdout, proc.stdout
        got, layout = fields(out)
        assert layout["mpi_ranks"] == 2                           # the file's first layout: the balanced 2 ranks
        for k in ref:
            assert ref[k].shape == got[k].shape, (tag, k)
            d = float(np.nanmax(np.abs(ref[k] - got[k])))
            print(f"\nresumed on {n} ({tag}): {k} max |difference| = {d:.3g} mV")
            assert d < 1e-6 * max(1.0, float(np.nanmax(np.abs(ref[k])))), (tag, k)
    assert np.nanmax(ref["Vm"][-1]) - np.nanmin(ref["Vm"][-1]) > 50


def test_bad_balance_is_one_line(tmp_path):
    cfg = sheet(tmp_path, "monodomain")
    proc = run_cli(["run", cfg, "--output", tmp_path / "bad.h5", "--set", 'grid.balance="even"'])
    assert_one_line(proc, "grid.balance", ["grid.balance", "even", "auto", "tissue", "box"])
    assert not (tmp_path / "bad.h5").exists()
