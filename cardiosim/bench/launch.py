"""How benchmarks start their runs and describe the machine they ran on."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path


def machine() -> dict:
    """Host, CPU model, core count and GPU names, for the header of a benchmark table."""
    info = {"host": platform.node(), "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                             text=True, timeout=20).stdout.strip().splitlines()
        info["gpu"] = ", ".join(gpu) if gpu else "none"
    except (OSError, subprocess.SubprocessError):
        info["gpu"] = "none"
    return info


def find_mpirun() -> str | None:
    """The mpirun that belongs to this Python's environment (MPICH from PyPI in .venv), else the one on PATH."""
    here = Path(sys.executable).parent / "mpirun"
    return str(here) if here.exists() else shutil.which("mpirun")


def mpirun_command(ranks: int) -> list[str]:
    launcher = find_mpirun()
    if launcher is None:
        raise SystemExit("no mpirun found (neither next to the Python interpreter nor on PATH)")
    return [launcher, "-n", str(ranks)]
