"""The benchmarks: programs (``python -m cardiosim.bench.<name>``; most also ``cardiosim bench <name>``). Every
one runs one BLAS/OpenMP thread per rank, set here, before a benchmark module loads NumPy or PETSc, and inherited
by the ranks it starts (cardiosim.runtime.threads)."""

from cardiosim.runtime.threads import one_thread_per_rank

one_thread_per_rank()
