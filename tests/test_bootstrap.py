"""tools/bootstrap.sh's choices, with `--plan` (it says what it would set up and changes nothing): a GPU
set-up where nvcc and a GPU are seen, the CPU one otherwise or with CARDIOSIM_GPU=0, CARDIOSIM_GPU=1 on a machine
without GPUs (the architecture from CARDIOSIM_CUDA_ARCH), and the mistakes, each one line and exit status 1. nvcc
and nvidia-smi are stood in for by scripts; the real set-up is what `make setup` does (CI: .ci/run; a GPU node:
tools/gpu/fresh-clone-setup.sh)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT

BOOTSTRAP = ROOT / "tools" / "bootstrap.sh"


def _bin(tmp_path: Path, nvcc=True, gpus=("NVIDIA H100 80GB HBM3, 9.0",)) -> Path:
    """A PATH folder with stand-ins: nvcc 13.0 (its root in tmp_path/cuda) and an nvidia-smi listing ``gpus``."""
    bin_ = tmp_path / "bin"
    bin_.mkdir(parents=True, exist_ok=True)
    (tmp_path / "cuda" / "bin").mkdir(parents=True, exist_ok=True)
    if nvcc:
        (bin_ / "nvcc").write_text(f'#!/bin/sh\ncase "$*" in *--version*) echo "Cuda compilation tools, release 13.0, '
                                   f'V13.0.88" ;; *) echo "#$ TOP={tmp_path}/cuda/bin/.." >&2 ;; esac\n')
    listing = "".join(f'echo "{g}"\n' for g in gpus)
    (bin_ / "nvidia-smi").write_text(f"#!/bin/sh\n{listing}" if gpus else "#!/bin/sh\nexit 9\n")
    for p in bin_.iterdir():
        p.chmod(0o755)
    return bin_


def _tools(tmp_path: Path) -> Path:
    """A PATH folder with the few system tools --plan uses, and nothing else (no nvcc the machine may have)."""
    tools = tmp_path / "tools"
    if not tools.exists():
        tools.mkdir()
        for name in ("dirname", "sed", "head", "grep", "cut", "cat", "basename", "id", "md5sum", "ls", "sort"):
            found = shutil.which(name)
            if found:
                (tools / name).symlink_to(found)
    return tools


def plan(tmp_path, bin_, **env):
    """`bootstrap.sh --plan` with only ``bin_`` and a few system tools on PATH; (exit status, stdout, stderr)."""
    full = {"PATH": f"{bin_}:{_tools(tmp_path)}", "HOME": str(tmp_path), "PYTHON": sys.executable, **env}
    proc = subprocess.run([shutil.which("bash"), str(BOOTSTRAP), "--plan"], env=full, capture_output=True, text=True,
                          timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def _lines(out: str) -> list[str]:
    return [ln.split("] ", 1)[1] for ln in out.splitlines()]


def test_gpu_seen(tmp_path):
    rc, out, err = plan(tmp_path, _bin(tmp_path))
    assert rc == 0, err
    assert _lines(out) == [f"GPU: yes (nvcc 13.0 at {(tmp_path / 'cuda').resolve()}; 1 GPU(s) seen: NVIDIA H100 80GB "
                           f"HBM3): PETSc with CUDA for sm_90, PyCUDA (CARDIOSIM_GPU=0 for CPUs only)"]


def test_cpu_without_a_gpu_or_without_nvcc(tmp_path):
    rc, out, _ = plan(tmp_path, _bin(tmp_path, gpus=()))
    assert rc == 0 and _lines(out) == ["GPU: no (nvcc but no GPU that nvidia-smi lists): PETSc for CPUs "
                                       "(CARDIOSIM_GPU=1 builds for GPUs, e.g. on a login node)"]
    rc, out, _ = plan(tmp_path, _bin(tmp_path / "b", nvcc=False))
    assert rc == 0 and _lines(out)[0].startswith("GPU: no (no nvcc on PATH)")


def test_forced_choices(tmp_path):
    bin_ = _bin(tmp_path)
    rc, out, _ = plan(tmp_path, bin_, CARDIOSIM_GPU="0")
    assert rc == 0 and _lines(out) == ["GPU: no (CARDIOSIM_GPU=0): PETSc for CPUs, no PyCUDA"]
    login = _bin(tmp_path / "login", gpus=())
    rc, out, _ = plan(tmp_path, login, CARDIOSIM_GPU="1", CARDIOSIM_CUDA_ARCH="80")
    assert rc == 0 and "0 GPU(s) seen): PETSc with CUDA for sm_80" in out


@pytest.mark.parametrize("env, gpus, nvcc, message", [
    ({"CARDIOSIM_GPU": "1"}, (), True, "CARDIOSIM_GPU=1 and no GPU here to read the architecture from: set "
                                       "CARDIOSIM_CUDA_ARCH (90 for H100/H200, 80 for A100)"),
    ({"CARDIOSIM_GPU": "1"}, ("NVIDIA H100, 9.0",), False, "CARDIOSIM_GPU=1 but no nvcc on PATH: load CUDA (its "
                                                           "bin/ on PATH) first"),
    ({"CARDIOSIM_GPU": "yes"}, (), True, "CARDIOSIM_GPU=yes: use 1 (build for GPUs), 0 (CPUs only) or leave it unset "
                                         "(GPUs where nvcc and a GPU are seen)"),
    ({"CARDIOSIM_GPU": "1", "CARDIOSIM_CUDA_ARCH": "sm_90"}, (), True, "set CARDIOSIM_CUDA_ARCH (90 for"),
])
def test_mistakes_are_one_line(tmp_path, env, gpus, nvcc, message):
    rc, out, err = plan(tmp_path, _bin(tmp_path, nvcc=nvcc, gpus=gpus), **env)
    assert rc == 1
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_wheelhouse(tmp_path):
    bin_ = _bin(tmp_path, gpus=())
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    rc, out, err = plan(tmp_path, bin_, CARDIOSIM_WHEELHOUSE=f"{a}:{b}")
    assert rc == 0, err
    assert _lines(out)[1] == f"packages: only from {a} {b} (CARDIOSIM_WHEELHOUSE; no index, no apt-get)"
    rc, out, err = plan(tmp_path, bin_, CARDIOSIM_WHEELHOUSE=f"{a}:{tmp_path / 'missing'}")
    assert rc == 1 and err.strip() == (f"[bootstrap] error: CARDIOSIM_WHEELHOUSE: {tmp_path / 'missing'} is not a "
                                       f"folder (a folder of wheels and sdists, or several joined by :)")


def test_petsc_dir_must_have_cuda_on_a_gpu_set_up(tmp_path):
    rc, out, _ = plan(tmp_path, _bin(tmp_path), PETSC_DIR="/opt/petsc", PETSC_ARCH="arch-opt")
    assert rc == 0 and _lines(out)[-1] == "PETSc: PETSC_DIR=/opt/petsc PETSC_ARCH=arch-opt (must have CUDA)"


def test_plan_changes_nothing(tmp_path):
    venv = tmp_path / "venv"
    rc, _, _ = plan(tmp_path, _bin(tmp_path), VENV=str(venv), CARDIOSIM_CACHE=str(tmp_path / "cache"))
    assert rc == 0 and not venv.exists() and not (tmp_path / "cache").exists()
