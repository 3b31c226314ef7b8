"""cardiosim: bidomain and monodomain cardiac electrophysiology on PETSc, cell models on CPUs or GPUs."""

import os as _os

__version__ = "0.1.0"

# One MPI rank per core: a multithreaded BLAS under every rank oversubscribes the node (seen on the GPU node:
# VecAXPY 100× slower with 16 ranks). Set before NumPy/PETSc load their BLAS; an explicit setting wins.
for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    _os.environ.setdefault(_var, "1")
