# cardiosim — the two commands that matter:  make run  ·  make test
# Both set up .venv on first use (tools/bootstrap.sh: MPI, PETSc + petsc4py, numpy, h5py, pytest).
# On a cluster, load your MPI (mpicc on PATH) and optionally PETSc (PETSC_DIR/PETSC_ARCH) before the first make.

PYTHON ?= python3
VENV   ?= .venv
NP     ?= 2
CONFIG ?= run/demo.toml
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.cardiosim-setup

.PHONY: run test test-gpu bench bench-kernels bench-niederer bench-table41 examples setup clean

$(STAMP): tools/bootstrap.sh setup.cfg pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) bash tools/bootstrap.sh
	touch $@

setup: $(STAMP)

## make run: the default simulation (run/demo.toml) on $(NP) MPI ranks, written to out/demo.h5
run: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH mpirun -n $(NP) $(VENV)/bin/cardiosim run $(CONFIG) --overwrite

## make test: the whole CPU test suite (MPI tests run under mpirun -n 2)
test: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) -m pytest -ra

## make test-gpu: only the GPU-marked tests (on a GPU node; see docs/gpu-tests.md)
test-gpu: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(PY) -m pytest -ra -m gpu

## make examples: the example PNGs of docs/output-format.md (run/demo.toml at 0.05 cm for 400 ms; about a minute)
EXAMPLE_RUN = --set grid.spacing=0.05 --set simulation.duration=400 --set output.interval=2
examples: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH mpirun -n $(NP) $(VENV)/bin/cardiosim run run/demo.toml \
	    --output out/examples/demo.h5 --overwrite --quiet $(EXAMPLE_RUN)
	$(VENV)/bin/cardiosim plot out/examples/demo.h5 --times 10 30 50 70 --out docs/examples
	$(VENV)/bin/cardiosim plot out/examples/demo.h5 --times 10 30 50 70 --field phi_e --out docs/examples
	$(VENV)/bin/cardiosim inspect out/examples/demo.h5 > docs/examples/demo_inspect.txt

## make bench: PDE-step benchmarks, written to docs/benchmarks.md
bench: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/cardiosim bench pde --write docs/benchmarks.md

## make bench-kernels: every CUDA kernel variant, 1e5-1e7 cells, k = 1 and 100 (GPU node), to docs/benchmarks.md
bench-kernels: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/cardiosim bench kernels --write docs/benchmarks.md \
	    --json docs/bench/kernels.json

## make bench-niederer: the Niederer 2011 slab, nine runs on $(NP) ranks, written to docs/niederer.md
##   (RUNS="dx0.5_dt0.05 ..." for a subset)
bench-niederer: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/cardiosim bench niederer --ranks $(NP) \
	    $(if $(RUNS),--runs $(RUNS)) --write docs/niederer.md --json docs/bench/niederer.json

## make bench-table41: the seed's Table 4.1 scenario (run/seed-table41.toml: 625 x 625, Bondarenko, 10 steps) for every
##   CUDA kernel variant and placement on $(NP) ranks (NP=16 on a GPU node), written to docs/benchmarks.md
##   (VARIANTS="fused ..." for a subset)
bench-table41: $(STAMP)
	PATH=$(abspath $(VENV))/bin:$$PATH $(VENV)/bin/cardiosim bench table41 --ranks $(NP) \
	    $(if $(VARIANTS),--variants $(VARIANTS)) --write docs/benchmarks.md --json docs/bench/table41.json

clean:
	rm -rf out .pytest_cache
