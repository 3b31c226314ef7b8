"""The GPU floor: finding the GPUs (how many, which, of what architecture) and holding a device's primary context.
Both the cell side (cardiosim.reaction.ode) and the PDE side (cardiosim.solvers) use it, and the benchmarks; PyCUDA
is imported inside the functions, so importing this module needs no GPU.

- Without initialising CUDA (which would fix CUDA_VISIBLE_DEVICES and the device before PETSc is told which one to
  use): :func:`gpus_without_cuda` (a count), :func:`query_gpus` (nvidia-smi's list).
- With CUDA: :func:`cuda_driver` (PyCUDA's driver, initialised), :func:`visible_gpus` (a count, or why none),
  :func:`arch_of` / :func:`current_arch` (nvcc's -arch), :class:`PrimaryContext` (retain, push, pop, release of a
  device's primary context: the context PETSc's CUDA objects use).
"""

from __future__ import annotations

import os
import shutil
import subprocess

NO_PYCUDA = "PyCUDA is not installed (CARDIOSIM_GPU=1 make setup installs it)"


class PyCudaMissing(RuntimeError):
    """PyCUDA cannot be imported (:func:`import_pycuda`)."""


def import_pycuda():
    try:
        import pycuda.driver as cuda
    except ImportError as e:   # pragma: no cover - depends on the machine
        raise PyCudaMissing(
            "PyCUDA is not installed: the CUDA backend needs it (pip install 'cardiosim[gpu]', with the CUDA toolkit's "
            f"nvcc on PATH); use the native CPU backend otherwise ({e})") from e
    return cuda


def cuda_driver():
    """PyCUDA's driver module, initialised (cuInit; no context is made). :class:`PyCudaMissing` without PyCUDA,
    PyCUDA's own error without a driver."""
    cuda = import_pycuda()
    cuda.init()
    return cuda


def visible_gpus() -> tuple[int, str]:
    """(number of GPUs the CUDA driver shows, why none) — 0 with the reason where PyCUDA or a driver is missing."""
    try:
        cuda = import_pycuda()
    except PyCudaMissing:
        return 0, NO_PYCUDA
    try:
        cuda.init()
        n = cuda.Device.count()
    except Exception as e:     # pycuda.driver.Error: no driver, no device
        return 0, f"the CUDA driver reports: {e}"
    return n, "" if n else "the CUDA driver shows no device (CUDA_VISIBLE_DEVICES?)"


def gpus_without_cuda() -> int:
    """The number of GPUs this process would see, found without initialising CUDA (which would fix
    CUDA_VISIBLE_DEVICES and the device before PETSc is told which one to use): the entries of
    CUDA_VISIBLE_DEVICES where it is set, else the NVIDIA driver's list of GPUs."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([v for v in visible.split(",") if v.strip() and not v.strip().startswith("-")])
    try:
        return len(os.listdir("/proc/driver/nvidia/gpus"))
    except OSError:
        return 0


def query_gpus(fields: str, timeout: float | None = 30) -> tuple[list[list[str]], str]:
    """nvidia-smi's ``--query-gpu=<fields>`` (e.g. "name,compute_cap"): one list of the fields' values per GPU it
    lists (all of the machine's: CUDA_VISIBLE_DEVICES does not apply), or ([], why); without initialising CUDA."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return [], "nvidia-smi not found"
    try:
        proc = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        return [], f"nvidia-smi failed ({e})"
    if proc.returncode != 0:
        said = (proc.stderr or proc.stdout).strip().splitlines()
        return [], f"nvidia-smi: {said[0] if said else f'exit status {proc.returncode}'}"
    n = fields.count(",")             # the first field (a name) may hold commas; the others do not
    return [[v.strip() for v in line.rsplit(",", n)] for line in proc.stdout.strip().splitlines()], ""


def arch_of(device) -> str:
    """nvcc's -arch for a pycuda Device, e.g. "sm_90"."""
    major, minor = device.compute_capability()
    return f"sm_{major}{minor}"


def current_arch() -> str:
    """sm_XY of the CUDA device current in this thread (the one PETSc initialised), else of device 0."""
    cuda = cuda_driver()
    try:
        dev = cuda.Context.get_device()
    except cuda.LogicError:
        dev = cuda.Device(0)
    return arch_of(dev)


class PrimaryContext:
    """The primary context of CUDA device ``ordinal``, retained: the one context per device that PETSc's CUDA
    objects use too, so that memory and kernels of either are the other's. ``push()``/``pop()`` make it current
    and not; ``with ctx as cuda:`` pushes it around a block (``cuda``: PyCUDA's driver module); ``release()`` gives
    the retain back (what was allocated in it must be freed before). ``device`` is the pycuda Device."""

    def __init__(self, ordinal: int = 0):
        self.cuda = cuda_driver()
        self.device = self.cuda.Device(ordinal)
        self.context = self.device.retain_primary_context()

    def push(self) -> None:
        self.context.push()

    def pop(self) -> None:
        self.cuda.Context.pop()

    def synchronize(self) -> None:
        self.cuda.Context.synchronize()

    def release(self) -> None:
        self.context.detach()

    def __enter__(self):
        self.push()
        return self.cuda

    def __exit__(self, *exc):
        self.pop()
