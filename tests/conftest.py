"""Shared test helpers: running the CLI (optionally under mpirun) and building configs; capabilities a test needs.

A test that cannot run here (no GPU, no mpirun, no reference data, ...) skips through :func:`needs`, which names the
capability. ``CARDIOSIM_REQUIRE=gpu,mpi`` (comma-separated; ``make test-gpu`` sets gpu, CI sets mpi,gcc,root,cvodes)
turns such a skip into a failure that names what is missing, so a broken GPU or MPI set-up cannot pass as a suite
of skips.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from cardiosim.runtime.threads import one_thread_per_rank

# The suite is a program that runs MPI ranks, here and in the processes it starts: one BLAS/OpenMP thread each
# (cardiosim.runtime.threads), set before a test module loads NumPy or PETSc. An explicit setting wins.
one_thread_per_rank()

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT / "tests" / "data" / "reference"   # CellML and CVODE traces (README there)

CAPABILITIES = {
    "gpu": "a CUDA GPU with PyCUDA (make setup on a GPU node, or CARDIOSIM_GPU=1 make setup)",
    "multigpu": "as many GPUs as the test's layout (the 2- and 4-GPU cases)",
    "mpi": "an mpirun for the MPI tests",
    "gcc": "a C compiler for the native cell kernels",
    "nvcc": "the CUDA toolkit's nvcc",
    "root": "root, to mount a small tmpfs (a real full disk)",
    "vtk": "VTK's Python package (pip install vtk)",
    "cvodes": "Myokit's CVODES simulation: Myokit with the Sundials libraries (set-up installs them where it is root; "
              "else CARDIOSIM_SUNDIALS=prefix)",
}


def required() -> set[str]:
    """The capabilities CARDIOSIM_REQUIRE names; an unknown name is a mistake in the environment, said at once."""
    names = {n.strip() for n in os.environ.get("CARDIOSIM_REQUIRE", "").split(",") if n.strip()}
    unknown = names - set(CAPABILITIES)
    if unknown:
        raise pytest.UsageError(f"CARDIOSIM_REQUIRE: unknown capability {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(CAPABILITIES)}")
    return names


def needs(capability: str, present: bool, why: str = "") -> None:
    """Skip the calling test unless ``present``; fail instead where CARDIOSIM_REQUIRE names ``capability``."""
    assert capability in CAPABILITIES, capability
    if present:
        return
    what = f"{CAPABILITIES[capability]}" + (f": {why}" if why else "")
    if capability in required():
        pytest.fail(f"required capability '{capability}' is missing (CARDIOSIM_REQUIRE): {what}", pytrace=False)
    pytest.skip(f"needs {capability}: {what}")


def pytest_configure(config):
    required()   # a misspelt CARDIOSIM_REQUIRE stops the run before any test
    # Where the launcher is Open MPI (a system MPI, the GPU nodes'), it refuses root (containers, CI) and more ranks
    # than cores (the 4-rank tests on 2 cores); MPICH ignores these.
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        os.environ.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    os.environ.setdefault("OMPI_MCA_rmaps_base_oversubscribe", "1")
    # A PETSc with CUDA over an MPI that is not CUDA-aware (the GPU nodes' Open MPI) aborts at its first GPU object
    # unless told -use_gpu_aware_mpi 0. cardiosim run tells it itself; the tests that start PETSc in-process or in
    # scripts of their own get it from the environment (MPI is not loaded here: "not known to be aware").
    from cardiosim.runtime.info import export_gpu_aware_mpi_option
    export_gpu_aware_mpi_option()


def pytest_collection_modifyitems(config, items):
    """Where GPUs are required (make test-gpu), a run that selects no GPU test has tested nothing."""
    if "gpu" in required() and not any(item.get_closest_marker("gpu") for item in items):
        raise pytest.UsageError("CARDIOSIM_REQUIRE=gpu, but no GPU test is selected")


def mpirun() -> str | None:
    from cardiosim.runtime.mpi import find_mpirun
    return find_mpirun()


def run_cli(args, np: int = 1, cwd=None, timeout=600, check=False, env=None):
    """Run ``cardiosim ARGS`` in a subprocess (under mpirun when np > 1), with ``env`` added to the environment;
    returns CompletedProcess."""
    cmd = [sys.executable, "-m", "cardiosim", *map(str, args)]
    if np > 1:
        launcher = require_mpirun()
        cmd = [launcher, "-n", str(np), *cmd]
    env = dict(os.environ, PYTHONUNBUFFERED="1", **(env or {}))
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout}\n{proc.stderr}")
    return proc


@pytest.fixture(scope="session")
def petsc():
    """Initialise petsc4py once for in-process tests."""
    import petsc4py
    petsc4py.init([])
    from petsc4py import PETSc
    return PETSc


def mount_tmpfs(where, size: str) -> None:
    """A small file system at ``where`` (a real full disk for the tests); skips where mounting is not allowed."""
    where.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True,
                       capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        needs("root", False, f"mount -t tmpfs failed ({e})")


def require_mpirun() -> str:
    """The MPI launcher; skips (or fails, where mpi is required) without one."""
    launcher = mpirun()
    needs("mpi", launcher is not None, "no mpirun or mpiexec found on PATH")
    return launcher


def require_gpu(n: int = 1) -> int:
    """The number of visible GPUs; skips the test (or fails, where gpu is required) where PyCUDA or ``n`` GPUs are
    missing."""
    from cardiosim.reaction.placement import visible_gpus
    have, why = visible_gpus()
    needs("gpu", have >= max(n, 1), why if have == 0 else f"{n} GPUs wanted, {have} visible")
    return have


def require_cvodes():
    """Myokit, able to run its CVODES simulation (the independent integrator of the CellML tests); skips (or fails,
    where cvodes is required) otherwise."""
    try:
        from cardiosim.cells.cellml import myokit_cvodes
        myokit = myokit_cvodes()
        version = myokit.Sundials.version()
    except Exception as e:                      # ImportError, or Myokit's failure to compile its Sundials probe
        needs("cvodes", False, f"{type(e).__name__}: {e}")
        return None
    needs("cvodes", bool(version), "Myokit finds no Sundials (CVODES) libraries")
    return myokit


def require_gcc() -> str:
    import shutil
    cc = shutil.which("gcc") or shutil.which("cc")
    needs("gcc", cc is not None, "no gcc or cc on PATH")
    return cc


def pytest_runtest_logreport(report):
    """``CARDIOSIM_TEST_LOG=FILE``: every test phase's outcome and duration (s) appended to FILE as a JSON line as it
    ends (under pytest-xdist, from the controller), so that a run cut short still says what passed and what took
    long: the evidence for which tests to mark ``slow``."""
    log = os.environ.get("CARDIOSIM_TEST_LOG")
    if not log or os.environ.get("PYTEST_XDIST_WORKER") or (report.when != "call" and report.passed):
        return
    import json
    with open(log, "a") as f:
        f.write(json.dumps({"test": report.nodeid, "when": report.when, "outcome": report.outcome,
                            "seconds": round(report.duration, 3)}) + "\n")
