"""cardiosim: bidomain and monodomain cardiac electrophysiology on PETSc, cell models on CPUs or GPUs."""

__version__ = "0.1.0"
