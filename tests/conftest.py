"""Shared test helpers: running the CLI (optionally under mpirun) and building configs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = ROOT.parent / "shared" / "reference"


def mpirun() -> str | None:
    from cardiosim.bench.launch import find_mpirun
    return find_mpirun()


def run_cli(args, np: int = 1, cwd=None, timeout=600, check=False, env=None):
    """Run ``cardiosim ARGS`` in a subprocess (under mpirun when np > 1), with ``env`` added to the environment;
    returns CompletedProcess."""
    cmd = [sys.executable, "-m", "cardiosim", *map(str, args)]
    if np > 1:
        launcher = mpirun()
        if launcher is None:
            pytest.skip("no mpirun available")
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


def mount_tmpfs(where, size: str) -> bool:
    """A small file system at ``where`` (a real full disk for the tests); False where mounting needs root."""
    where.mkdir()
    try:
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)], check=True,
                       capture_output=True)
        return True
    except (OSError, subprocess.CalledProcessError):
        return False


def require_gpu() -> int:
    """The number of visible GPUs; skips the test where PyCUDA or a GPU is missing."""
    import pytest
    from cardiosim.placement import visible_gpus
    n, why = visible_gpus()
    if n == 0:
        pytest.skip(f"no GPU: {why}")
    return n
