"""cardiosim: bidomain and monodomain cardiac electrophysiology on PETSc, cell models on CPUs or GPUs.

Importing it changes nothing in the process: the programs (the ``cardiosim`` command, the benchmarks) set one
BLAS/OpenMP thread per rank themselves (cardiosim.runtime.threads).
"""

__version__ = "0.1.0"
