"""Placement of the cell integration (cardiosim/reaction/placement.py, docs/dev/design.md §4): the pure assignment of node ranks to
groups and GPUs; cpu, grouped and exchange = full giving the same numbers on 1, 2 and 4 ranks; the layout in the
output; a failure on any rank (a bad state, an exception, a killed process) ending the whole job."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import h5py
import json
import numpy as np
import pytest

from cardiosim.runtime.errors import UserError
from cardiosim.reaction.placement import blocks, layout_table, plan_node, resolve
from cardiosim.runtime.timing import Timers

from conftest import mpirun, require_mpirun, run_cli

SHEET = Path(__file__).parent / "configs" / "sheet.toml"


# -- the pure assignment -----------------------------------------------------------------------------------------
def test_blocks_are_contiguous_and_even():
    assert blocks(1, 1) == (0,)
    assert blocks(4, 2) == (0, 0, 1, 1)
    assert blocks(5, 2) == (0, 0, 0, 1, 1)                  # uneven: the first group one larger
    assert blocks(16, 3) == (0,) * 6 + (1,) * 5 + (2,) * 5
    assert blocks(16, 16) == tuple(range(16))
    with pytest.raises(ValueError):
        blocks(2, 3)


def test_grouped_one_group_per_gpu():
    p = plan_node(16, "grouped", n_gpus=4)
    assert p.group == tuple(g for g in range(4) for _ in range(4))
    assert p.owner == (0, 4, 8, 12) and p.device == (0, 1, 2, 3) and p.idle_gpus == ()
    p = plan_node(16, "grouped", n_gpus=1)
    assert set(p.group) == {0} and p.owner == (0,) and p.device == (0,)
    p = plan_node(7, "grouped", n_gpus=2)                    # uneven groups
    assert p.group == (0, 0, 0, 0, 1, 1, 1) and p.owner == (0, 4)


def test_more_gpus_than_ranks_leaves_gpus_idle():
    p = plan_node(1, "grouped", n_gpus=4)
    assert p.group == (0,) and p.device == (0,) and p.idle_gpus == (1, 2, 3)
    p = plan_node(2, "per-rank", n_gpus=4)
    assert p.device == (0, 1) and p.idle_gpus == (2, 3)


def test_grouped_with_cpu_owner_and_other_modes():
    assert plan_node(4, "grouped", groups_per_node=2) == plan_node(4, "grouped", n_gpus=0, groups_per_node=2)
    p = plan_node(4, "grouped", groups_per_node=2)
    assert p.group == (0, 0, 1, 1) and p.owner == (0, 2) and p.device == (None, None)
    assert plan_node(2, "grouped", groups_per_node=8).group == (0, 1)   # at most one group per rank
    p = plan_node(5, "per-rank", n_gpus=2)
    assert p.group == (0, 1, 2, 3, 4) and p.device == (0, 1, 0, 1, 0)
    p = plan_node(3, "cpu")
    assert p.group == (0, 1, 2) and p.device == (None, None, None)
    with pytest.raises(ValueError):
        plan_node(2, "per-rank", n_gpus=0)


def test_resident_one_rank_per_gpu():
    p = plan_node(4, "resident", n_gpus=4)
    assert p.group == (0, 1, 2, 3) and p.owner == (0, 1, 2, 3) and p.device == (0, 1, 2, 3) and p.idle_gpus == ()
    p = plan_node(2, "resident", n_gpus=4)
    assert p.device == (0, 1) and p.idle_gpus == (2, 3)
    with pytest.raises(UserError, match="one MPI rank per GPU.*3 ranks and 2 GPU"):
        plan_node(3, "resident", n_gpus=2)
    p = plan_node(3, "resident", n_gpus=2, share_gpu=True)       # tests: ranks share, node rank mod GPUs
    assert p.device == (0, 1, 0)
    with pytest.raises(ValueError):
        plan_node(1, "resident", n_gpus=0)


def test_modes_are_one_table():
    from cardiosim.reaction.placement import MODE, MODES
    assert MODES == ("auto", "cpu", "grouped", "per-rank", "resident")
    assert [m for m in MODE if MODE[m].gpu_pde] == ["resident"]
    assert [m for m in MODE if MODE[m].grouped] == ["grouped"]
    from cardiosim import config
    assert set(MODES) == set(config.Cell.__dataclass_fields__["placement"].metadata["choices"])


def test_device_selection_without_cuda(monkeypatch):
    """PETSc's GPU comes from the node rank (-device_select), counted without initialising CUDA; CUDA_VISIBLE_DEVICES
    and the user's own -device_* options are honoured."""
    from mpi4py import MPI

    from cardiosim.reaction.placement import gpus_without_cuda, petsc_device_options
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    monkeypatch.delenv("PETSC_OPTIONS", raising=False)
    assert gpus_without_cuda() == 2
    assert petsc_device_options(MPI.COMM_SELF) == ["-device_select", "0"]
    assert petsc_device_options(MPI.COMM_SELF, ["-device_select", "1"]) == []
    monkeypatch.setenv("PETSC_OPTIONS", "-use_gpu_aware_mpi 0 -device_enable none")
    assert petsc_device_options(MPI.COMM_SELF) == []
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.delenv("PETSC_OPTIONS")
    assert gpus_without_cuda() == 0 and petsc_device_options(MPI.COMM_SELF) == []


def test_resolve_modes_and_bad_combinations():
    assert resolve("auto", "auto", has_kernel=True) == ("cpu", "native")
    assert resolve("auto", "auto", has_kernel=False) == ("cpu", "numpy")
    assert resolve("auto", "cuda", has_kernel=True) == ("grouped", "cuda")
    assert resolve("grouped", "auto", has_kernel=True) == ("grouped", "native")
    assert resolve("per-rank", "cuda", has_kernel=True) == ("per-rank", "cuda")
    assert resolve("resident", "cuda", has_kernel=True) == ("resident", "cuda")
    assert resolve("resident", "auto", has_kernel=True) == ("resident", "cuda")
    for placement, backend, kernel, words in (("cpu", "cuda", True, "cell.placement"),
                                              ("per-rank", "native", True, "cell.placement"),
                                              ("grouped", "cuda", False, "cell.backend"),
                                              ("resident", "native", True, "cell.placement"),
                                              ("resident", "auto", False, "cell.backend")):
        with pytest.raises(UserError, match=words):
            resolve(placement, backend, kernel)


def test_layout_table():
    layout = {"placement": "grouped", "ode_backend": "cuda", "exchange": "vm",
              "groups": [{"node": 0, "host": "a", "ranks": [0, 1, 2], "cells_on": "GPU 0", "owner": 0},
                         {"node": 0, "host": "a", "ranks": [3, 4], "cells_on": "GPU 1", "owner": 3},
                         {"node": 1, "host": "b", "ranks": [5, 6, 7, 9], "cells_on": "GPU 0", "owner": 5}],
              "idle_gpus": [{"node": 0, "host": "a", "gpus": [2, 3]}]}
    text = layout_table(layout)
    print("\n" + text)
    lines = text.splitlines()
    assert "exchange vm" in lines[0]
    assert lines[2].split()[:3] == ["0", "a", "0-2"] and lines[2].endswith("rank 0")
    assert "5-7,9" in lines[4] and lines[4].endswith("rank 5")
    assert lines[5] == "node 0 (a): GPU 2, 3 idle (fewer ranks than GPUs)"


def test_layout_of_two_nodes():
    """What place() gathers from every rank -> one entry per (node, group), owners as world ranks: node 0 with 3
    ranks on 2 GPUs, node 1 with 2 ranks on 4 GPUs (GPUs 2 and 3 idle)."""
    from cardiosim.reaction.placement import _layout
    rows = []
    for node, host, n_ranks, n_gpus, first in ((0, "a", 3, 2, 0), (1, "b", 2, 4, 3)):
        plan = plan_node(n_ranks, "grouped", n_gpus)
        rows += [(node, host, r, first + r, plan.group[r], plan.owner[plan.group[r]], f"GPU {plan.device[plan.group[r]]}")
                 for r in range(n_ranks)]
    lay = _layout("grouped", "cuda", "vm", rows, [(1, "b", plan_node(2, "grouped", 4).idle_gpus)])
    assert [(g["node"], g["ranks"], g["cells_on"], g["owner"]) for g in lay["groups"]] == [
        (0, [0, 1], "GPU 0", 0), (0, [2], "GPU 1", 2), (1, [3], "GPU 0", 3), (1, [4], "GPU 1", 4)]
    assert lay["idle_gpus"] == [{"node": 1, "host": "b", "gpus": [2, 3]}]


def test_nested_timers_count_each_second_once():
    t = Timers()
    with t("reaction"):
        time.sleep(0.02)
        with t("exchange"):
            time.sleep(0.03)
        time.sleep(0.02)
    assert 0.03 <= t.total["exchange"] < 0.045
    assert 0.04 <= t.total["reaction"] < 0.055


# -- the same numbers everywhere -----------------------------------------------------------------------------------
# Rotated fibres (box stencil) and multigrid, solvers at rtol 1e-13 so that rank counts can be compared too.
TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
MODES = {"cpu": ['cell.placement="cpu"'],
         "grouped": ['cell.placement="grouped"'],
         "grouped-full": ['cell.placement="grouped"', 'cell.exchange="full"']}
RUNS = [(1, "cpu", 1), (1, "grouped", 1), (2, "cpu", 1), (2, "grouped", 1), (2, "grouped-full", 1),
        (4, "cpu", 2), (4, "grouped", 2), (4, "grouped-full", 2)]     # (ranks, mode, cell.groups_per_node)


@pytest.fixture(scope="module")
def sheets(tmp_path_factory):
    """Vm, φe and layout of the sheet for every (ranks, mode) of RUNS (4 ms; 4 ranks oversubscribe CI's 2 cores)."""
    tmp = tmp_path_factory.mktemp("modes")
    res = {}
    for np_, mode, groups in RUNS:
        out = tmp / f"{mode}-np{np_}.h5"
        args = ["run", SHEET, "--quiet", "--output", out, "--set", "simulation.duration=4.0",
                "--set", "tissue.fibre_angle=30.0", "--set", f"cell.groups_per_node={groups}"]
        for s in MODES[mode]:
            args += ["--set", s]
        run_cli([*args, "--", *TIGHT], np=np_, check=True, timeout=300)
        with h5py.File(out) as f:
            res[np_, mode] = (f["fields/Vm"][:], f["fields/phi_e"][:], json.loads(f.attrs["layout"]))
    return res


@pytest.mark.mpi
@pytest.mark.parametrize("np_", [1, 2, 4])
@pytest.mark.slow
def test_cpu_grouped_and_full_exchange_give_the_same_numbers(sheets, np_):
    """The same cells integrated by their own rank or by the group's owner, Vm or every state exchanged: the same
    arithmetic per cell, so the same bits. Asserted as equality on 1 and 2 ranks. On 4 ranks PETSc itself is not
    bit-reproducible from run to run (its assembly adds off-process contributions in the order messages arrive;
    measured: the cpu mode alone differs by up to 8.5e-14 mV between two runs), so there the bound is 1e-12 mV."""
    cpu = sheets[np_, "cpu"]
    assert cpu[0][-1].max() > -40.0                            # the corner is excited (rest: -85 mV)
    assert cpu[2]["placement"] == "cpu"
    for mode in MODES:
        if (np_, mode) not in sheets or mode == "cpu":
            continue
        got = sheets[np_, mode]
        assert got[2]["placement"] == "grouped"
        assert got[2]["exchange"] == ("full" if mode == "grouped-full" else "vm")
        for i, field in enumerate(("Vm", "phi_e")):
            d = float(np.abs(got[i] - cpu[i]).max())
            print(f"\n{np_} rank(s), {mode} vs cpu: max |d{field}| = {d:.3g} mV")
            if np_ <= 2:
                assert np.array_equal(got[i], cpu[i]), f"{mode} {field} differs from cpu on {np_} ranks"
            else:
                assert d <= 1e-12


@pytest.mark.mpi
def test_groups_in_the_layout(sheets):
    assert [g["ranks"] for g in sheets[2, "grouped"][2]["groups"]] == [[0, 1]]
    assert [(g["ranks"], g["owner"]) for g in sheets[4, "grouped"][2]["groups"]] == [([0, 1], 0), ([2, 3], 2)]


@pytest.mark.mpi
def test_one_two_four_ranks_agree(sheets):
    """The rank count changes the preconditioners (tests/test_parallel.py): 1, 2 and 4 ranks agree to the solver
    tolerance, here rtol 1e-13, in every mode."""
    ref = sheets[1, "cpu"]
    for (np_, mode), got in sheets.items():
        d = [float(np.abs(got[i] - ref[i]).max()) for i in (0, 1)]
        print(f"\n1 rank cpu vs {np_} ranks {mode}: max |dVm| = {d[0]:.2e}, max |dphi_e| = {d[1]:.2e} mV")
        assert max(d) < 1e-8


@pytest.mark.mpi
@pytest.mark.slow
def test_native_cells_grouped_equal_cpu(tmp_path):
    """The compiled C integrator on the owner: TT06 on 2 ranks, one group, every state exchanged."""
    cfg = tmp_path / "tt06.toml"
    cfg.write_text(textwrap.dedent("""
        [simulation]
        duration = 3.0
        dt = 0.02
        ode_substeps = 10
        progress_interval = 0
        [grid]
        size = [0.2, 0.06]
        spacing = 0.01
        [cell]
        model = "tt06"
        backend = "native"
        [[stimulus]]
        shape = "box"
        lower = [0.0, 0.0]
        upper = [0.03, 0.06]
        duration = 1.0
        current_density = -52.0
        [output]
        interval = 1.0
    """))
    vm = {}
    for tag, sets in (("cpu", []), ("grouped", ["cell.placement='grouped'", "cell.exchange='full'"])):
        out = tmp_path / f"{tag}.h5"
        run_cli(["run", cfg, "--quiet", "--output", out, *[a for s in sets for a in ("--set", s)]], np=2,
                check=True)
        with h5py.File(out) as f:
            vm[tag] = f["fields/Vm"][:]
    assert vm["cpu"][-1].max() > 0.0
    assert np.array_equal(vm["cpu"], vm["grouped"])


@pytest.mark.mpi
def test_uneven_groups_layout(tmp_path):
    """3 ranks in 2 groups: ranks 0-1 owned by rank 0, rank 2 by itself; the layout is printed and stored."""
    out = tmp_path / "uneven.h5"
    proc = run_cli(["run", SHEET, "--output", out, "--set", "simulation.duration=0.1",
                    "--set", 'cell.placement="grouped"', "--set", "cell.groups_per_node=2"], np=3, check=True)
    print(proc.stdout)
    assert "placement grouped, cells on numpy, exchange vm" in proc.stdout
    with h5py.File(out) as f:
        lay = json.loads(f.attrs["layout"])
    assert [(g["ranks"], g["owner"]) for g in lay["groups"]] == [([0, 1], 0), ([2], 2)]


# -- failures end the job ------------------------------------------------------------------------------------------
@pytest.mark.mpi
def test_blow_up_found_by_the_owner_stops_every_rank(tmp_path):
    """The owner integrates every cell of its group: its failure reaches the members through the collective check;
    exit 3 and one line."""
    cfg = tmp_path / "sheet.toml"     # the pulse a whole number of the large steps
    cfg.write_text(SHEET.read_text().replace("duration = 1.0", "duration = 2.0"))
    proc = run_cli(["run", cfg, "--output", tmp_path / "out.h5", "--quiet", "--set", "simulation.dt=2.0",
                    "--set", "output.interval=2.0", "--set", 'cell.placement="grouped"'], np=2, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and "cell state" in lines[0] and "t = " in lines[0], lines


INJECT = """
import os, signal, sys
from mpi4py import MPI
from cardiosim.reaction.ode import grouped_backend
advance = grouped_backend.GroupedBackend.advance
calls = []

def failing(self, *args, **kw):
    calls.append(1)
    if MPI.COMM_WORLD.rank == int(os.environ["FAIL_RANK"]) and len(calls) == 3:
        if os.environ["FAIL_HOW"] == "raise":
            raise RuntimeError("injected failure")
        os.kill(os.getpid(), signal.SIGKILL)
    return advance(self, *args, **kw)

grouped_backend.GroupedBackend.advance = failing
from cardiosim.cli import main
sys.exit(main())
"""


@pytest.mark.mpi
@pytest.mark.parametrize("rank,how", [(1, "raise"), (0, "raise"), (1, "kill"), (0, "kill")])
@pytest.mark.slow
def test_exception_or_killed_rank_ends_the_job(tmp_path, rank, how):
    """In grouped mode the owner (rank 0) waits in Gatherv for its members and the members wait in Scatterv for the
    owner: an exception or a SIGKILL on either side in the third step must end the whole job, never hang."""
    launcher = require_mpirun()
    script = tmp_path / "inject.py"
    script.write_text(INJECT)
    env = dict(os.environ, FAIL_RANK=str(rank), FAIL_HOW=how, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    cmd = [launcher, "-n", "2", sys.executable, str(script), "run", str(SHEET), "--quiet",
           "--output", str(tmp_path / "out.h5"), "--set", "simulation.duration=1.0",
           "--set", 'cell.placement="grouped"']
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=90, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"rank {rank} {how}: the job hung")
    took = time.perf_counter() - t0
    print(f"\nrank {rank} {how}: exit {proc.returncode} after {took:.1f} s; output tail: "
          f"{(proc.stdout + proc.stderr)[-300:]!r}")
    assert proc.returncode != 0
    if how == "raise":
        assert f"internal error on rank {rank}" in proc.stderr and "injected failure" in proc.stderr
    else:   # the launcher names the signal (MPICH: "Killed (signal 9)"; Open MPI: "exited on signal 9 (Killed)")
        assert "signal 9" in proc.stdout + proc.stderr


# -- shared compilation ----------------------------------------------------------------------------------------------
@pytest.mark.mpi
def test_first_rank_starts_first_and_its_failure_reaches_all(tmp_path):
    """first_then_others: rank 0 runs first (it compiles the kernel into the cache), the others after it succeeded;
    when it fails, every rank raises and no other rank tries; ranks that compiled different sources are refused."""
    launcher = require_mpirun()
    log = tmp_path / "starts"
    script = tmp_path / "first.py"
    script.write_text(textwrap.dedent(f"""
        import time
        from mpi4py import MPI
        from cardiosim.reaction.ode.cuda_backend import first_then_others
        comm = MPI.COMM_WORLD

        def start():
            if comm.rank == 0:
                time.sleep(0.5)                      # the others must wait for it
            with open({str(log)!r}, "a") as f:
                f.write(f"{{comm.rank}}\\n")
            return comm.rank

        assert first_then_others(comm, start) == comm.rank
        comm.Barrier()

        def broken():
            with open({str(log)!r}, "a") as f:
                f.write(f"broken {{comm.rank}}\\n")
            raise OSError("nvcc not found")
        try:
            first_then_others(comm, broken)
        except RuntimeError as e:
            assert "nvcc not found" in str(e)
            print(f"rank {{comm.rank}} raised", flush=True)

        class Built:                                 # a kernel whose source differs between the ranks
            source_digest = f"digest-of-rank-{{comm.rank}}"
        try:
            first_then_others(comm, Built)
        except RuntimeError as e:
            assert "compiled different kernel sources" in str(e)
            print(f"rank {{comm.rank}} refused", flush=True)
    """))
    proc = subprocess.run([launcher, "-n", "2", sys.executable, str(script)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert log.read_text().splitlines() == ["0", "1", "broken 0"]
    assert proc.stdout.count("raised") == 2
    assert proc.stdout.count("refused") == 2


# -- bad combinations ------------------------------------------------------------------------------------------------
@pytest.mark.mpi
@pytest.mark.parametrize("sets,words", [
    (['cell.placement="per-rank"'], "cell.placement"),
    (['cell.placement="cpu"', 'cell.backend="cuda"', 'cell.model="tt06"'], "cell.placement"),
    (['cell.exchange="some"'], "cell.exchange"),
    (['cell.groups_per_node=0'], "cell.groups_per_node"),
])
def test_bad_placement_is_one_line(tmp_path, sets, words):
    args = ["run", SHEET, "--output", tmp_path / "out.h5"]
    for s in sets:
        args += ["--set", s]
    proc = run_cli(args, np=2, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and words in lines[0], proc.stderr
    assert not (tmp_path / "out.h5").exists()


@pytest.mark.mpi
def test_cuda_without_gpu_is_one_line(tmp_path):
    from cardiosim.reaction.placement import visible_gpus
    if visible_gpus()[0]:
        pytest.skip("a GPU is visible here")
    proc = run_cli(["run", SHEET, "--output", tmp_path / "out.h5", "--set", 'cell.model="tt06"',
                    "--set", 'cell.backend="cuda"'], np=2, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and "no usable GPU" in lines[0], proc.stderr


def test_cubin_cache_with_a_stand_in_compiler(tmp_path, monkeypatch):
    """compile_cached (the CUDA kernel cache the node's ranks share) with PyCUDA's compile and nvcc stood in for:
    one compilation per (source, options, architecture), C++17 when C++14 fails, the file written whole."""
    import types

    from cardiosim.runtime.compile import compile_cached
    calls = []

    def compile(src, options, arch, include_dirs, no_extern_c, cache_dir):
        calls.append((options[0], arch))
        assert cache_dir is False and no_extern_c
        if options[0] == "-std=c++14" and "-DOLD" not in options:
            raise RuntimeError("nvcc: C++14 is not supported")
        return f"cubin of {src} {' '.join(options)} {arch}".encode()

    pycuda = types.ModuleType("pycuda")
    compiler = types.ModuleType("pycuda.compiler")
    compiler.compile = compile
    pycuda.compiler = compiler
    monkeypatch.setitem(sys.modules, "pycuda", pycuda)
    monkeypatch.setitem(sys.modules, "pycuda.compiler", compiler)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvcc").write_text("#!/bin/sh\necho 'nvcc stand-in, release 99.9'\n")
    (bin_dir / "nvcc").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path / "cache"))

    a = compile_cached("src", ["-DX=1"], "sm_90")
    assert a == b"cubin of src -std=c++17 -DX=1 sm_90" and calls == [("-std=c++14", "sm_90"), ("-std=c++17", "sm_90")]
    assert compile_cached("src", ["-DX=1"], "sm_90") == a and len(calls) == 2          # from the cache
    assert compile_cached("src", ["-DX=1"], "sm_80") != a and len(calls) == 4          # another architecture
    assert compile_cached("src", ["-DOLD"], "sm_90") == b"cubin of src -std=c++14 -DOLD sm_90"
    files = sorted(p.name for p in (tmp_path / "cache" / "cuda").iterdir())
    assert len([f for f in files if f.endswith(".cubin")]) == 3 and not [f for f in files if f.endswith(".tmp")]
