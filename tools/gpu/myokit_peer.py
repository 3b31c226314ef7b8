"""The peer of cardiosim's fused cell kernel: Myokit's own generated CUDA kernel (the ``cuda-kernel`` exporter,
Forward Euler) timed the way tools/gpu/cell_kernel_occupancy.py times cardiosim's fused kernel, so the two stand in
one table from one GPU run.

    python3 tools/gpu/myokit_peer.py time [--models ...] [--cells 1048576] [--k 100]     (one GPU, PyCUDA)
    python3 tools/gpu/myokit_peer.py compile [--models ...] [--arch sm_90]               (nvcc only, no GPU)

What is Myokit's and what is ours. Myokit 1.39 writes a ``__device__`` function ``iterate_euler_cu(dt, state,
I_diff, parameters)``, one Forward-Euler step of one cell, with every constant a ``#define`` (so folded, as our
specialised headers are) and the equations per component as Myokit orders them: no common subexpressions, no
reciprocals. Its template hard-codes single precision; the peer here is its own template with that one line set to
double (``precision = myokit.DOUBLE_PRECISION``), since cardiosim's kernels are FP64 and an FP32 figure would
compare arithmetic, not code. It needs a variable bound to ``diffusion_current`` (the model gets one, 0: cells at
rest, as in our throughput loop; Myokit's template drops the unbound time, so the stimulus is its value at t = 0,
off for these files). The ``__global__`` wrapper is ours: each thread loads its cell's states (structure of arrays,
as our kernel reads them), takes k steps in registers and writes them back; dt as in cell_kernel_occupancy.py (1e-4 ms
for Bondarenko, 1e-3 ms otherwise), 2^20 cells, 10 launches after a warm-up one, best of ``--repeats``, block 128.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODELS = {"tt06": ROOT / "models" / "ten_tusscher_model_2006_epi.cellml",
          "bondarenko": ROOT / "models" / "bondarenko_szigeti_bett_kim_rasmusson_2004_apical.cellml",
          "ord2011": ROOT / "models" / "ohara_rudy_2011_endo.cellml",
          "courtemanche": ROOT / "models" / "courtemanche_ramirez_nattel_1998.cellml"}

WRAPPER = """
extern "C" __global__ void peer_euler(double *y, const int n, const int k, const double dt)
{
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    Real state[NDIM];
#pragma unroll
    for (int j = 0; j < NDIM; ++j) state[j] = y[(size_t)j * n + i];
    for (int s = 0; s < k; ++s) iterate_euler_cu(dt, state, 0.0, 0);
#pragma unroll
    for (int j = 0; j < NDIM; ++j) y[(size_t)j * n + i] = state[j];
}
"""


def source(path: Path) -> tuple[str, list[float]]:
    """(CUDA source, initial states) of Myokit's FP64 Forward-Euler kernel for the CellML file ``path``."""
    import myokit
    import myokit.formats
    from myokit.formats.cuda import CudaKernelExporter
    from cardiosim.cells import cellml
    m = cellml.load_myokit(str(path))
    v = cellml.membrane_potential(m, str(path))
    d = v.parent().add_variable_allow_renaming("i_diff")
    d.set_rhs(0)
    d.set_binding("diffusion_current")
    template = Path(myokit.formats.__file__).parent / "cuda" / "template" / "kernel.cu"
    with tempfile.TemporaryDirectory() as tmp:
        tdir = Path(tmp) / "template"
        tdir.mkdir()
        text = template.read_text()
        assert "precision = myokit.SINGLE_PRECISION" in text, "Myokit's CUDA template changed"
        (tdir / "kernel.cu").write_text(text.replace("precision = myokit.SINGLE_PRECISION",
                                                     "precision = myokit.DOUBLE_PRECISION"))

        class Double(CudaKernelExporter):
            def _dir(self, root):
                return str(tdir)
        out = Path(tmp) / "out"
        Double().runnable(str(out), m)
        cu = (out / "kernel.cu").read_text()
    return cu + WRAPPER, list(m.initial_values(as_floats=True))


NVCC_FLAGS = ["--fmad=true", "-O3"]       # as our fused kernel is built: FMA on


def compile_only(names, arch) -> int:
    """nvcc -cubin of each peer kernel (the check that runs without a GPU); prints ptxas's registers and spills."""
    bad = 0
    for name in names:
        cu, _ = source(MODELS[name])
        with tempfile.TemporaryDirectory() as tmp:
            f = Path(tmp) / "peer.cu"
            f.write_text(cu)
            r = subprocess.run(["nvcc", "-cubin", f"-arch={arch}", *NVCC_FLAGS, "-Xptxas", "-v", "-o",
                                str(Path(tmp) / "peer.cubin"), str(f)], capture_output=True, text=True)
        info = [line.strip() for line in r.stderr.splitlines() if "peer_euler" in line or "registers" in line]
        print(f"{name}: nvcc exit {r.returncode}; " + " / ".join(info[-2:]))
        if r.returncode:
            print(r.stderr[-2000:], file=sys.stderr)
            bad += 1
    return 1 if bad else 0


def time_peer(name, n, k, launches, repeats, block=128) -> dict:
    import numpy as np
    import pycuda.autoinit  # noqa: F401
    import pycuda.driver as cuda
    from pycuda.compiler import SourceModule
    cu, y0 = source(MODELS[name])
    mod = SourceModule(cu, no_extern_c=True, options=NVCC_FLAGS)
    fn = mod.get_function("peer_euler")
    y = np.repeat(np.asarray(y0, dtype=np.float64)[:, None], n, axis=1)
    d = cuda.mem_alloc(y.nbytes)
    cuda.memcpy_htod(d, y)
    dt = 1e-4 if name == "bondarenko" else 1e-3
    grid = ((n + block - 1) // block, 1)
    args = (d, np.int32(n), np.int32(k), np.float64(dt))
    fn(*args, block=(block, 1, 1), grid=grid)          # warm-up
    cuda.Context.synchronize()
    best = 0.0
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(launches):
            fn(*args, block=(block, 1, 1), grid=grid)
        cuda.Context.synchronize()
        best = max(best, n * k * launches / (time.perf_counter() - t0))
    cuda.memcpy_dtoh(y, d)
    finite = bool(np.isfinite(y).all())
    return {"rate": best, "registers": fn.num_regs, "local": fn.local_size_bytes, "finite": finite,
            "v_range": (float(y[0].min()), float(y[0].max()))}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("time", "compile"))
    p.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from cell_kernel_occupancy import loop_arguments       # the same loop, the same options
    loop_arguments(p)
    a = p.parse_args(argv)
    if a.what == "compile":
        return compile_only(a.models, a.arch)
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines() if shutil.which("nvidia-smi") else ["?"]
    print(f"Myokit {__import__('myokit').__version__} cuda-kernel (FP64), GPU: {gpu[0]}; 2^{a.cells.bit_length() - 1} "
          f"cells at rest, k = {a.k}, {a.launches} launches, best of {a.repeats}, block 128, fmad on\n")
    print("| model | registers | local (B/thread) | cell-steps/s | states finite | V after (mV) |\n|---|---|---|---|---|---|")
    for name in a.models:
        try:
            r = time_peer(name, a.cells, a.k, a.launches, a.repeats)
        except Exception as e:                          # one model failing must not lose the table
            print(f"| myokit peer: {name} | failed: {str(e).splitlines()[0][:100]} | | | | |", flush=True)
            continue
        print(f"| myokit peer: {name} | {r['registers']} | {r['local']} | {r['rate']:.3e} | {r['finite']} "
              f"| {r['v_range'][0]:.2f} to {r['v_range'][1]:.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
