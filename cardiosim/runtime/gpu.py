"""The GPU floor: importing PyCUDA with a clear message, and naming a device's architecture. Both the cell side
(cardiosim.reaction.ode) and the PDE side (cardiosim.solvers) use it; PyCUDA is imported inside the functions, so
importing this module needs no GPU.
"""

from __future__ import annotations


def import_pycuda():
    try:
        import pycuda.driver as cuda
    except ImportError as e:   # pragma: no cover - depends on the machine
        raise RuntimeError(
            "PyCUDA is not installed: the CUDA backend needs it (pip install 'cardiosim[gpu]', with the CUDA toolkit's "
            f"nvcc on PATH); use the native CPU backend otherwise ({e})") from e
    return cuda


def arch_of(device) -> str:
    """nvcc's -arch for a pycuda Device, e.g. "sm_90"."""
    major, minor = device.compute_capability()
    return f"sm_{major}{minor}"


def current_arch() -> str:
    """sm_XY of the CUDA device current in this thread (the one PETSc initialised), else of device 0."""
    cuda = import_pycuda()
    cuda.init()
    try:
        dev = cuda.Context.get_device()
    except cuda.LogicError:
        dev = cuda.Device(0)
    return arch_of(dev)
