"""cardiosim info, the rank-count check of cardiosim run, and GPU PETSc options against a PETSc without CUDA
(cardiosim/runtime/info.py, cardiosim/runtime/petsc.py). All on the CPU: a PETSc with CUDA and another MPI's
launcher are stood in for (a petscconf.h, the launchers' environment variables, an `mpirun --version` script)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, run_cli

from cardiosim.runtime import info
from cardiosim.runtime.errors import UserError

SHEET = ROOT / "tests" / "configs" / "sheet.toml"


# --- the rank count ------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("env, expected", [
    ({}, None),
    ({"OMPI_COMM_WORLD_SIZE": "4"}, (4, "OMPI_COMM_WORLD_SIZE")),
    ({"PMI_SIZE": "2", "SLURM_STEP_NUM_TASKS": "8"}, (2, "PMI_SIZE")),     # mpirun inside an srun step: its own
    ({"SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "16"}, (8, "SLURM_STEP_NUM_TASKS")),
    ({"SLURM_NTASKS": "16"}, None),                        # the batch script itself: mpirun -n 4 there is allowed
    ({"SLURM_NTASKS": "16", "SLURM_STEP_ID": "0"}, (16, "SLURM_NTASKS")),
    ({"OMPI_COMM_WORLD_SIZE": "", "PMI_SIZE": "x"}, None),
])
def test_launcher_ranks(env, expected):
    assert info.launcher_ranks(env) == expected


def test_rank_count_check():
    info.check_rank_count(4, {"OMPI_COMM_WORLD_SIZE": "4"})
    info.check_rank_count(1, {})
    with pytest.raises(UserError, match=r"the launcher started 16 ranks \(SLURM_NTASKS=16\) but MPI sees 1"):
        info.check_rank_count(1, {"SLURM_NTASKS": "16", "SLURM_STEP_ID": "0"})


def _one_line_no_file(proc, out: Path, *words):
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in lines if ln.startswith("cardiosim: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr
    for w in words:
        assert w in errors[0], errors[0]
    assert not list(out.parent.glob(out.stem + "*")), list(out.parent.iterdir())


def test_run_refuses_a_rank_count_other_than_slurms(tmp_path):
    """What N single-rank copies of a run (mpi4py linked to another MPI than srun's) each see: MPI size 1 in a
    step of 3 tasks. One line, exit 2, no output, no lock, no checkpoint."""
    out = tmp_path / "run.h5"
    proc = run_cli(["run", SHEET, "--output", out], cwd=tmp_path,
                   env={"SLURM_NTASKS": "3", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "3"})
    _one_line_no_file(proc, out, "launcher started 3 ranks", "MPI sees 1", "cardiosim info")


@pytest.mark.mpi
def test_run_under_mpirun_in_a_slurm_step_passes_the_check(tmp_path):
    """mpirun -n 2 inside a step that srun started with one task: the launcher's own count (PMI_SIZE or
    OMPI_COMM_WORLD_SIZE) is the one compared, and it matches."""
    out = tmp_path / "run.h5"
    proc = run_cli(["run", SHEET, "--output", out, "--quiet", "--set", "simulation.duration=0.2"], np=2,
                   cwd=tmp_path, env={"SLURM_NTASKS": "1", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1"})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert out.is_file()


# --- GPU options against a PETSc without CUDA ----------------------------------------------------------------------

def _fake_petsc(tmp_path, monkeypatch, cuda: bool):
    conf = tmp_path / "petsc" / "include"
    conf.mkdir(parents=True)
    (conf / "petscconf.h").write_text("#define PETSC_HAVE_MPI 1\n" + ("#define PETSC_HAVE_CUDA 1\n" if cuda else ""))
    monkeypatch.setattr(info, "petsc_home", lambda: tmp_path / "petsc")


def test_petsc_has_cuda_reads_petscconf(tmp_path, monkeypatch):
    assert info.petsc_conf() is not None          # this machine's PETSc is found
    _fake_petsc(tmp_path, monkeypatch, cuda=True)
    assert info.petsc_has_cuda()
    (tmp_path / "petsc" / "include" / "petscconf.h").write_text("#define PETSC_HAVE_MPI 1\n")
    assert not info.petsc_has_cuda()


def test_petsc_is_the_one_beside_petsc4py_not_the_one_its_wheel_was_built_in(monkeypatch):
    """A petsc4py wheel from a cache records the folder of the venv that built it; info and petscconf.h must be
    this venv's PETSc (the ``petsc`` package that petsc4py's library loads), not that folder's."""
    import importlib.util
    import petsc
    import petsc4py
    mine = Path(petsc.get_petsc_dir())
    monkeypatch.setattr(petsc4py, "get_config", lambda: {"PETSC_DIR": "/elsewhere/venv/petsc", "PETSC_ARCH": ""})
    assert info.petsc_home() == mine
    assert info.petsc_conf() == mine / "include" / "petscconf.h"
    # no petsc package (a cluster's PETSc): petsc4py's record is all there is
    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "petsc" else find_spec(name, *a))
    assert info.petsc_home() == Path("/elsewhere/venv/petsc")
    assert info.petsc_conf() is None


def test_gpu_aware_option_for_a_cuda_petsc(tmp_path, monkeypatch):
    monkeypatch.delenv("PETSC_OPTIONS", raising=False)
    _fake_petsc(tmp_path, monkeypatch, cuda=True)
    monkeypatch.setattr(info, "mpi_cuda_aware", lambda: False)
    assert info.gpu_aware_mpi_options([]) == ["-use_gpu_aware_mpi", "0"]
    monkeypatch.setattr(info, "mpi_cuda_aware", lambda: None)        # unknown: staged through the host, correct
    assert info.gpu_aware_mpi_options([]) == ["-use_gpu_aware_mpi", "0"]
    assert info.gpu_aware_mpi_options(["-use_gpu_aware_mpi", "1"]) == []              # the user's wins
    monkeypatch.setenv("PETSC_OPTIONS", "-use_gpu_aware_mpi 1")
    assert info.gpu_aware_mpi_options([]) == []
    monkeypatch.delenv("PETSC_OPTIONS")
    monkeypatch.setattr(info, "mpi_cuda_aware", lambda: True)
    assert info.gpu_aware_mpi_options([]) == []
    (tmp_path / "petsc" / "include" / "petscconf.h").write_text("#define PETSC_HAVE_MPI 1\n")
    monkeypatch.setattr(info, "mpi_cuda_aware", lambda: False)
    assert info.gpu_aware_mpi_options([]) == []                        # a CPU PETSc needs nothing


def test_gpu_types_checked_against_petscconf(tmp_path, monkeypatch):
    from cardiosim.runtime import petsc as petsc_options
    monkeypatch.delenv("PETSC_OPTIONS", raising=False)
    _fake_petsc(tmp_path, monkeypatch, cuda=False)
    petsc_options.check_gpu_types(["-elliptic_pc_type", "gamg", "-dm_mat_type", "aij"])
    for args in (["-dm_vec_type", "cuda"], ["-dm_mat_type", "aijcusparse"], ["-elliptic_mat_type", "sellcuda"]):
        with pytest.raises(UserError, match="CARDIOSIM_GPU=1 make setup"):
            petsc_options.check_gpu_types(args)
    monkeypatch.setenv("PETSC_OPTIONS", "-dm_vec_type cuda")
    with pytest.raises(UserError, match=r"-dm_vec_type cuda: this PETSc was built without CUDA"):
        petsc_options.check_gpu_types([])
    _fake_petsc(tmp_path / "cuda", monkeypatch, cuda=True)
    petsc_options.check_gpu_types(["-dm_vec_type", "cuda", "-dm_mat_type", "aijcusparse"])


@pytest.mark.skipif(info.petsc_has_cuda(), reason="this PETSc has CUDA")
def test_run_with_gpu_options_on_a_cpu_petsc(tmp_path):
    """run/slurm/gpu.sbatch's old options on a CPU PETSc: one line naming the fix, exit 2, nothing written (was a
    petsc4py traceback and exit 1)."""
    out = tmp_path / "run.h5"
    proc = run_cli(["run", SHEET, "--output", out, "--", "-dm_vec_type", "cuda", "-dm_mat_type", "aijcusparse"],
                   cwd=tmp_path)
    _one_line_no_file(proc, out, "-dm_vec_type cuda", "built without CUDA", "CARDIOSIM_GPU=1 make setup")


# --- cardiosim info --------------------------------------------------------------------------------------------------

def test_mpi_names():
    assert info._mpi_words("Open MPI v4.1.6, package: Debian OpenMPI, ident: 4.1.6, repo rev: v4.1.6") \
        == "Open MPI 4.1.6"
    assert info._mpi_words("MPICH Version:      5.0.2\nMPICH Release date: ...") == "MPICH 5.0.2"


def _script(path: Path, text: str) -> Path:
    path.write_text("#!/bin/bash\n" + text)
    path.chmod(0o755)
    return path


def test_launcher_mpi_from_version(tmp_path):
    ompi = _script(tmp_path / "ompi", 'echo "mpirun (Open MPI) 4.1.6"; echo; echo "Report bugs to ..."\n')
    assert info.launcher_mpi(str(ompi)) == "Open MPI 4.1.6"
    hydra = _script(tmp_path / "hydra", 'printf "HYDRA build details:\\n    Version:  5.0.2\\n"\n')
    assert info.launcher_mpi(str(hydra)) == "MPICH 5.0.2"
    assert info.launcher_mpi(str(_script(tmp_path / "other", "echo hello\n"))) is None


def _info(tmp_path, env=None):
    """`cardiosim info` with ``env`` added; PATH as given (run_cli would put this venv's bin/ first)."""
    env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-m", "cardiosim", "info"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)


def test_info_reports_every_part(tmp_path):
    proc = _info(tmp_path)
    parts = [ln.split()[0] for ln in proc.stdout.splitlines() if ln.strip()]
    for part in ("cardiosim", "python", "PETSc", "petsc4py", "PyCUDA", "GPUs", "nvcc", "MPI", "mpirun", "ranks"):
        assert part in parts, proc.stdout
    petsc = next(ln for ln in proc.stdout.splitlines() if ln.startswith("PETSc"))
    assert ("with CUDA" in petsc) == info.petsc_has_cuda(), petsc
    mpi = next(ln for ln in proc.stdout.splitlines() if ln.startswith("MPI "))
    assert info.mpi_library().split()[0] in mpi and "CUDA-aware" in mpi
    # exit status 0 exactly where no problem line is printed
    assert (proc.returncode == 0) == ("problem" not in parts), proc.stdout
    assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr


def test_info_names_a_launcher_of_another_mpi(tmp_path):
    """An `mpirun` of Open MPI first on PATH while mpi4py uses MPICH (or the other way round): exit 1, named."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    other = "Open MPI 9.9.9"
    _script(bin_ / "mpirun", 'echo "mpirun (Open MPI) 9.9.9"\n')
    proc = _info(tmp_path, env={"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("mpirun"))
    assert other in line and "NOT mpi4py's MPI" in line
    assert any(ln.startswith("problem") and str(bin_ / "mpirun") in ln for ln in proc.stdout.splitlines())


def test_info_names_a_rank_mismatch(tmp_path):
    proc = _info(tmp_path, env={"OMPI_COMM_WORLD_SIZE": "4"})
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "the launcher started 4 ranks but MPI sees 1" in proc.stdout


def test_info_sees_gpus_through_nvidia_smi(tmp_path):
    """GPUs listed by nvidia-smi and a PETSc without CUDA (or no PyCUDA): the GPUs are named and the verdict is
    exit 1 with the set-up that fixes it."""
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _script(bin_ / "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3, 9.0"; echo "NVIDIA H100 80GB HBM3, 9.0"\n')
    proc = _info(tmp_path, env={"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}"})
    gpus = next(ln for ln in proc.stdout.splitlines() if ln.startswith("GPUs"))
    assert "2: NVIDIA H100 80GB HBM3 (sm_90), NVIDIA H100 80GB HBM3 (sm_90)" in gpus, gpus
    import importlib.util
    if not (info.petsc_has_cuda() and importlib.util.find_spec("pycuda")):
        assert proc.returncode == 1 and "CARDIOSIM_GPU=1 make setup" in proc.stdout, proc.stdout
    proc = _info(tmp_path, env={"PATH": f"{bin_}{os.pathsep}{os.environ['PATH']}", "CUDA_VISIBLE_DEVICES": "1"})
    gpus = next(ln for ln in proc.stdout.splitlines() if ln.startswith("GPUs"))
    assert gpus.split()[1] == "1:", gpus


def test_mpi_cuda_awareness_is_a_boolean_or_unknown():
    from mpi4py import MPI   # noqa: F401 - loads and initialises the MPI library the probe reads
    assert info.mpi_cuda_aware() in (True, False, None)


def test_info_says_when_mpi4py_does_not_load(tmp_path):
    """mpi4py without its MPI library (a module not loaded): info says so in its lines, exit 1, no traceback."""
    proc = _info(tmp_path, env={"MPI4PY_LIBMPI": str(tmp_path / "nowhere" / "libmpi.so")})
    if "does not load" not in proc.stdout:
        pytest.skip("this mpi4py does not read MPI4PY_LIBMPI (mpi4py < 4.1 or not a PyPI wheel)")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert any(ln.startswith("problem") and "mpi4py does not load its MPI library" in ln
               for ln in proc.stdout.splitlines())


def test_gpu_aware_option_exported_for_processes_that_start_petsc(tmp_path, monkeypatch):
    monkeypatch.setenv("PETSC_OPTIONS", "-log_view")
    _fake_petsc(tmp_path, monkeypatch, cuda=True)
    monkeypatch.setattr(info, "mpi_cuda_aware", lambda: None)
    info.export_gpu_aware_mpi_option()
    assert os.environ["PETSC_OPTIONS"] == "-log_view -use_gpu_aware_mpi 0"
    info.export_gpu_aware_mpi_option()                      # once only
    assert os.environ["PETSC_OPTIONS"] == "-log_view -use_gpu_aware_mpi 0"
