# cardiosim — the two commands that matter:  make run  ·  make test
# Both set up .venv on first use (tools/bootstrap.sh: MPI, PETSc + petsc4py, numpy, h5py, pytest).
# On a cluster, load your MPI (mpicc on PATH) and optionally PETSc (PETSC_DIR/PETSC_ARCH) before the first make.
# Works from any directory (make -C path/to/cardiosim test, make -f path/to/Makefile run); VENV may be relative
# (to the directory make was started in) or absolute.

ROOT   := $(patsubst %/,%,$(dir $(abspath $(lastword $(MAKEFILE_LIST)))))
PYTHON ?= python3
VENV   ?= $(ROOT)/.venv
NP     ?= 2
CONFIG ?= run/demo.toml
# Every recipe runs in $(ROOT); the venv's path is fixed here, before that cd, so a relative VENV keeps its meaning.
override VENV := $(abspath $(VENV))
PY      = $(VENV)/bin/python
STAMP   = $(VENV)/.cardiosim-setup
IN_ROOT = cd $(ROOT) && PATH=$(VENV)/bin:$$PATH
PYTEST  = $(IN_ROOT) $(PY) -m pytest -ra

comma := ,
.PHONY: run test test-all test-gpu bench bench-kernels bench-niederer bench-table41 bench-cellml bench-heart performance \
        examples examples-purkinje setup clean

$(STAMP): $(ROOT)/tools/bootstrap.sh $(ROOT)/setup.cfg $(ROOT)/pyproject.toml
	PYTHON=$(PYTHON) VENV=$(VENV) bash $(ROOT)/tools/bootstrap.sh
	touch $@

## make setup: tools/bootstrap.sh, run again even where it has run (quick where all is in place): on a GPU node
##   (nvcc on PATH, a GPU that nvidia-smi lists) it builds PETSc with CUDA and PyCUDA; CARDIOSIM_GPU=1 forces that
##   (a login node: CARDIOSIM_CUDA_ARCH=90), CARDIOSIM_GPU=0 the CPU set-up; CARDIOSIM_WHEELHOUSE=DIR offline
setup:
	PYTHON=$(PYTHON) VENV=$(VENV) bash $(ROOT)/tools/bootstrap.sh
	touch $(STAMP)

## make run: the default simulation (run/demo.toml) on $(NP) MPI ranks, written to out/demo.h5
run: $(STAMP)
	$(IN_ROOT) mpirun -n $(NP) $(VENV)/bin/cardiosim run $(CONFIG) --overwrite

## make test: the CPU test suite CI runs: every test not marked gpu or slow (MPI tests under mpirun -n 2). The GPU
##   tests are make test-gpu's, the slow ones make test-all's. CARDIOSIM_REQUIRE=mpi,gcc,root,cvodes turns the skips
##   for those capabilities into failures.
test: $(STAMP)
	$(PYTEST) -m "not gpu and not slow" --durations=15

## make test-all: every CPU test, the slow ones too (the Niederer slab runs, every CellML model against CVODES, the
##   long multi-rank, restart and signal cases, the documented commands' long blocks)
test-all: $(STAMP)
	$(PYTEST) -m "not gpu" --durations=15

## make test-gpu: only the GPU-marked tests, on a GPU node (docs/dev/testing.md). A missing GPU, PyCUDA or mpirun
##   fails the run, naming what is missing; nothing passes by skipping. GPU_WORKERS (default 8) test processes share
##   the GPU (pytest-xdist; 1: one after another). TESTS="tests/a.py tests/b.py": those files' GPU tests only.
GPU_WORKERS ?= 8
test-gpu: $(STAMP)
	$(IN_ROOT) CARDIOSIM_REQUIRE=gpu,mpi$(if $(CARDIOSIM_REQUIRE),$(comma)$(CARDIOSIM_REQUIRE)) $(PY) -m pytest -ra -m gpu \
	    $(if $(filter-out 1,$(GPU_WORKERS)),-n $(GPU_WORKERS)) $(TESTS)

## make examples: the example PNGs of docs/user/output-format.md: what make run and cardiosim plot (default times) give,
##   the figures of cardiosim cell's files (a TT06 trace, restitution, population and concentration series), and a
##   spiral's movie, phase, tips and dominant frequency (run/spiral-s1s2.toml), and a sweep's CV restitution curve
CELL_EXAMPLE = --model tt06 --integrator rush-larsen --dt 0.02 --period 400
examples: $(STAMP)
	$(IN_ROOT) mpirun -n $(NP) $(VENV)/bin/cardiosim run run/demo.toml \
	    --output out/examples/demo.h5 --overwrite --quiet
	cd $(ROOT) && $(VENV)/bin/cardiosim plot out/examples/demo.h5 --out docs/examples --overwrite
	cd $(ROOT) && $(VENV)/bin/cardiosim plot out/examples/demo.h5 --field phi_e --out docs/examples --overwrite
	cd $(ROOT) && $(VENV)/bin/cardiosim inspect out/examples/demo.h5 > docs/examples/demo_inspect.txt
	cd $(ROOT) && $(VENV)/bin/cardiosim cell $(CELL_EXAMPLE) --beats 2 --record-every 0.1 \
	    --output out/examples/cell_trace.h5 --overwrite --quiet
	cd $(ROOT) && $(VENV)/bin/cardiosim cell $(CELL_EXAMPLE) --prepace 2 --restitution 250,280,300,350,400 \
	    --record-every 0.5 --output out/examples/cell_restitution.h5 --overwrite --quiet
	cd $(ROOT) && $(VENV)/bin/cardiosim cell $(CELL_EXAMPLE) --population 40 --sample g_Kr=lognormal:0.3 \
	    --sample g_CaL=uniform:0.5:1.5 --keep APD90=240:290 --record-every 0.5 \
	    --output out/examples/cell_population.h5 --overwrite --quiet
	cd $(ROOT) && $(VENV)/bin/cardiosim cell $(CELL_EXAMPLE) --beats 2 --block g_Kr=0.1 \
	    --concentration 0,0.03,0.1,0.3,1 --record-every 0.5 --output out/examples/cell_drug.h5 --overwrite --quiet
	cd $(ROOT) && for f in trace restitution population drug; do \
	    $(VENV)/bin/cardiosim plot out/examples/cell_$$f.h5 --out docs/examples --overwrite || exit 1; done
	$(IN_ROOT) $(VENV)/bin/cardiosim run run/spiral-s1s2.toml --output out/examples/spiral.h5 --overwrite --quiet
	cd $(ROOT) && $(VENV)/bin/cardiosim plot out/examples/spiral.h5 --out docs/examples --overwrite --dpi 80 \
	    --movie --every 2 --phase --tips --dominant-frequency --times 300 400 500 600 --window 300 700
	$(IN_ROOT) $(VENV)/bin/cardiosim sweep run/s1s2-restitution.toml --vary stimulus.S2.start=130:250:40 \
	    --set 'probe=[{name = "near", position = [0.3, 0.1]}, {name = "far", position = [0.7, 0.1]}]' \
	    --collect probe.far.di.2 cv.near.far.1 cv.near.far.2 --plot cv.near.far.2 --against probe.far.di.2 \
	    --out out/examples/cv-restitution --jobs 2 --overwrite --quiet
	cd $(ROOT) && cp out/examples/cv-restitution/sweep_cv.near.far.2_vs_probe.far.di.2.png docs/examples/sweep_cv_restitution.png

## make examples-purkinje: the BiV with its grown conduction system, normal and with the left bundle branch cut
##   (run/biv-purkinje.toml, run/biv-lbbb.toml; about 4 min on one rank): their network-over-tissue figures and
##   their 12-lead ECGs side by side (docs/examples/biv_purkinje_lbbb_ecg.png, docs/user/ventricles.md section 8)
examples-purkinje: $(STAMP)
	$(IN_ROOT) $(VENV)/bin/cardiosim geometry biv --spacing 0.1 --out out/biv-1mm.h5 --overwrite
	cd $(ROOT) && for f in purkinje lbbb; do $(VENV)/bin/cardiosim run run/biv-$$f.toml \
	    --output out/examples/biv-$$f.h5 --overwrite --quiet || exit 1; done
	cd $(ROOT) && for f in purkinje lbbb; do $(VENV)/bin/cardiosim plot out/examples/biv-$$f.h5 \
	    --out out/examples --overwrite --dpi 90 > /dev/null || exit 1; cp out/examples/biv-$${f}_purkinje.png docs/examples/; done
	$(IN_ROOT) $(VENV)/bin/python tools/ecg_pair.py out/examples/biv-purkinje.h5 out/examples/biv-lbbb.h5 \
	    --labels "normal (run/biv-purkinje.toml)" "LBBB (run/biv-lbbb.toml)" --out docs/examples/biv_purkinje_lbbb_ecg.png

# The bench targets write their raw results to benchmarks/raw/ (cardiosim bench's own JSON); the current figures are
# the records in benchmarks/*.json, which make performance turns into docs/performance.md and the README's figures.
RAW = benchmarks/raw

## make bench: the PDE-step benchmark (cardiosim bench pde: 2D bidomain sheets of 10^4 to 10^6 nodes, 1 and 2
##   ranks), raw results to benchmarks/raw/pde.json
bench: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench pde --json $(RAW)/pde.json
	@echo "raw results in $(RAW)/pde.json: record the figures in benchmarks/pde-step.json, then make performance"

## make bench-kernels: every CUDA kernel variant, 1e5-1e7 cells, k = 1 and 100 (GPU node), raw results to
##   benchmarks/raw/kernels.json
bench-kernels: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench kernels --json $(RAW)/kernels.json
	@echo "raw results in $(RAW)/kernels.json: record the figures in benchmarks/kernel-variants.json, then make performance"

## make bench-cellml: the CellML conformance table over models/ (79 models, 5 beats each; JOBS models at a time,
##   default the machine's cores), to docs/user/cell-models.md; raw results to benchmarks/raw/cellml.json
JOBS ?= $(shell nproc 2>/dev/null || echo 1)
bench-cellml: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench cellml --jobs $(JOBS) --write docs/user/cell-models.md --json $(RAW)/cellml.json

## make bench-niederer: the Niederer 2011 slab, nine runs on $(NP) ranks, written to docs/user/niederer.md
##   (RUNS="dx0.5_dt0.05 ..." for a subset); raw results to benchmarks/raw/niederer.json
bench-niederer: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench niederer --ranks $(NP) \
	    $(if $(RUNS),--runs $(RUNS)) --write docs/user/niederer.md --json $(RAW)/niederer.json

## make bench-table41: the seed's Table 4.1 scenario (run/seed-table41.toml: 625 x 625, Bondarenko, 10 steps) for every
##   CUDA kernel variant and placement on $(NP) ranks (NP=16 on a GPU node), raw results to
##   benchmarks/raw/table41.json (VARIANTS="fused ..." for a subset)
bench-table41: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench table41 --ranks $(NP) \
	    $(if $(VARIANTS),--variants $(VARIANTS)) --json $(RAW)/table41.json
	@echo "raw results in $(RAW)/table41.json: record the figures in benchmarks/table41.json, then make performance"

## make bench-heart: whole hearts on one GPU (cardiosim bench heart: the built-in BiV at 0.25 and 0.125 mm and the
##   human-size BiV at 0.25 mm, preparation, set-up and 10 ms of steps each; CASES="biv-0.25 ..." for a subset),
##   raw results to benchmarks/raw/heart.json
bench-heart: $(STAMP)
	mkdir -p $(ROOT)/$(RAW)
	$(IN_ROOT) $(VENV)/bin/cardiosim bench heart $(if $(CASES),--cases $(CASES)) --json $(RAW)/heart.json
	@echo "raw results in $(RAW)/heart.json: record the figures in benchmarks/heart.json, then make performance"

## make performance: regenerate docs/performance.md and the README's figures from benchmarks/*.json (python3 only,
##   no venv needed)
performance:
	cd $(ROOT) && $(PYTHON) tools/performance_table.py

clean:
	cd $(ROOT) && rm -rf out .pytest_cache
