"""``cardiosim bench NAME ...``: the benchmarks (cardiosim/bench/), each parsing its own words (see its --help)."""

from __future__ import annotations

import importlib
import sys

from cardiosim.cli import common

START = common.RAW

BENCHMARKS = {"kernels": "cardiosim.bench.kernels", "niederer": "cardiosim.bench.niederer",
              "pde": "cardiosim.bench.pde", "table41": "cardiosim.bench.table41",
              "cellml": "cardiosim.bench.cellml", "microscopic": "cardiosim.bench.microscopic",
              "mask": "cardiosim.bench.mask", "scaling": "cardiosim.bench.scaling",
              "halo": "cardiosim.bench.halo", "cell-steps": "cardiosim.bench.cell_steps",
              "pacing": "cardiosim.bench.pacing", "heart": "cardiosim.bench.heart"}


def add_parser(sub) -> None:
    sub.add_parser("bench", help="benchmarks, written to docs/: " + ", ".join(BENCHMARKS) + " (see cardiosim bench "
                                 "NAME --help)", add_help=False)


def main(words) -> int:
    # Benchmarks start their runs with mpirun; this process must not be an MPI process itself (an OpenMPI
    # singleton's environment makes a nested mpirun fail without a word). Their PETSc starts itself: a CUDA
    # PETSc over an MPI not known to be CUDA-aware is told so through the environment (cardiosim.runtime.info).
    from cardiosim.runtime.info import export_gpu_aware_mpi_option   # lazy: only what a RAW verb needs, first
    export_gpu_aware_mpi_option()
    if not words or words[0] not in BENCHMARKS:
        print(f"cardiosim: error: cardiosim bench: name a benchmark: {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    return importlib.import_module(BENCHMARKS[words[0]]).main(words[1:])
