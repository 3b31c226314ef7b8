"""The floor every other package stands on: errors, compiling and caching native code, GPU discovery, MPI
collectives, PETSc start-up and options, files, logging, timing, signals and resource estimates. Nothing here
imports any other cardiosim package."""
