"""Cell-kernel benchmark: cell-steps per second of every CUDA kernel variant, beside the ceilings of docs/dev/design.md §8.

For each variant (cardiosim/reaction/ode/kernel_variants.py), each number of cells and each number of substeps per PDE step
k: Bondarenko apical cells with staggered stimuli, one call of CudaBackend.advance per PDE step (one launch for
``fused``, k launches for the seed's variants), timed after a warm-up call. In the same run:

- the device-to-device copy bandwidth, measured, and from it the bandwidth ceiling of each variant: bytes moved per
  cell-step = 2 x 41 x 8 B of state per launch (+ the same again for the auxiliary array of the aux variants),
  divided by the substeps per launch;
- the compute ceiling: the FP64 issue rate of the GPU (docs/dev/design.md §8: ~1.7e13 instructions/s on an H100) over the
  FP64 instructions of one substep, counted in the fused kernel's PTX (a division counted as 10, its SASS expansion);
- registers and spills of each variant, from the loaded module;
- the NumPy reference backend on one core, for scale.

    python -m cardiosim.bench.kernels --json benchmarks/raw/kernels.json
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import time

import numpy as np

from cardiosim.bench.launch import machine, publish
from cardiosim.runtime.gpu import PrimaryContext
from cardiosim.cells import make
from cardiosim.cells.stimulus import Protocol

FP64_ISSUE_RATE = {"H100": 1.7e13, "H200": 1.7e13}   # instructions/s, docs/dev/design.md §8 (same SMs on the H200)
PEER = "Myokit 1.39.2 CUDA Euler, FP64, one H100, 10⁶ cells: 1.9·10⁹ (k = 1), 2.2·10⁹ (k = 100) cell-steps/s"
TARGET = 4e9
DT = 1e-4       # ms
STARTS = (1.0, 2.0, 3.0, 4.0)


def stimulus(n):
    protocols = [Protocol(s, 0.5, 0.0, 1) for s in STARTS]
    amps = np.zeros((len(STARTS), n))
    c = np.arange(n)
    for p in range(len(STARTS)):
        amps[p, c % (len(STARTS) + 1) == p] = -80.0
    return protocols, amps


def copy_bandwidth(n_bytes=2 << 30, repeats=10) -> float:
    """Device-to-device copy, bytes read + written per second."""
    import pycuda.driver as cuda
    a, b = cuda.mem_alloc(n_bytes), cuda.mem_alloc(n_bytes)
    cuda.memcpy_dtod(b, a, n_bytes)
    cuda.Context.synchronize()
    t0 = time.perf_counter()
    for _ in range(repeats):
        cuda.memcpy_dtod(b, a, n_bytes)
    cuda.Context.synchronize()
    wall = time.perf_counter() - t0
    a.free()
    b.free()
    return 2 * n_bytes * repeats / wall


def fp64_instructions_per_step(model) -> int:
    """FP64 instructions in the fused kernel's PTX (one substep's worth; the loop body is the whole kernel but for
    the load/store of the state), a division counted as 10."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.ptxas import nvcc
    return ptx_fp64(nvcc(model, "fused", "-ptx", "sm_90")[0].decode())


def ptx_fp64(ptx: str) -> int:
    """:func:`fp64_instructions_per_step`'s count in the PTX text ``ptx`` of the fused kernel."""
    body = ptx[ptx.index(".entry cs_fused_euler"):]
    body = re.split(r"^\.(?:visible\s+)?\.?func|^\.func|^// .globl", body[1:], flags=re.M)[0]  # this entry only
    n = len(re.findall(r"^\s*(?:@%p\d+\s+)?(?:add|sub|mul|fma|neg|abs|min|max|setp\.\w+|rcp\.\w+|cvt\.\w+)\S*\.f64",
                       body, flags=re.M))
    n += 10 * len(re.findall(r"^\s*div\.rn\.f64", body, flags=re.M))
    return n


_SASS_FP64 = re.compile(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?(D(?:FMA|ADD|MUL|SETP|MNMX|SET)\b|MUFU\.\w+64H"
                        r"|F2F\.F64|F2F\.F32\.F64|I2F\.F64|F2I\.\S*F64|FRND\.F64)", re.M)


def nvdisasm() -> str | None:
    """nvdisasm: on PATH, ``$CARDIOSIM_NVDISASM``, or pip's nvidia-cuda-nvdisasm in this Python's environment."""
    import os
    import shutil
    from pathlib import Path
    if os.environ.get("CARDIOSIM_NVDISASM"):
        return os.environ["CARDIOSIM_NVDISASM"]
    found = shutil.which("nvdisasm")
    if found:
        return found
    for site in map(Path, sys.path):
        for cand in sorted(site.glob("nvidia/cu*/bin/nvdisasm")):
            return str(cand)
    return None


def sass_fp64(cubin: bytes, function: str = "cs_fused_euler") -> dict:
    """FP64 instructions in the SASS of ``function`` in ``cubin`` (nvdisasm), its body only: the slow-path
    subroutines nvcc appends (``$__internal_*``: division's full path, the reciprocal's and sqrt's slow paths) are
    left out, each call to them counted in ``calls``. Returns {"fp64", "dfma", "dadd", "dmul", "mufu", "calls",
    "instructions"} (``instructions``: every instruction of the body)."""
    import subprocess
    import tempfile
    from pathlib import Path
    tool = nvdisasm()
    if not tool:
        raise RuntimeError("nvdisasm not found (PATH, $CARDIOSIM_NVDISASM, or pip install nvidia-cuda-nvdisasm)")
    with tempfile.TemporaryDirectory(prefix="cardiosim-sass-") as tmp:
        f = Path(tmp) / "k.cubin"
        f.write_bytes(cubin)
        text = subprocess.run([tool, "-c", str(f)], capture_output=True, text=True, check=True).stdout
    start = text.index(f"\n{function}:")
    body = text[start:]
    m = re.search(r"^\s*\.(?:weak|global|section)\b", body[1:], flags=re.M)
    body = body[:m.start() + 1] if m else body
    ops = _SASS_FP64.findall(body)
    return {"fp64": len(ops), "dfma": ops.count("DFMA"), "dadd": ops.count("DADD"), "dmul": ops.count("DMUL"),
            "mufu": sum(o.startswith("MUFU") for o in ops), "calls": len(re.findall(r"\bCALL\.", body)),
            "instructions": len(re.findall(r"^\s*/\*[0-9a-f]+\*/\s+\S", body, flags=re.M))}


def measure(model, variant, n, k, min_seconds=0.3) -> dict:
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    protocols, amps = stimulus(n)
    with CudaBackend(model, model.initial_state(n), variant=variant) as be:
        stim = be.stimulus(protocols, amps)
        be.advance(0.0, DT, k, stim)                    # warm-up (and the pulse trains uploaded)
        be.synchronize()
        calls, t0 = 0, time.perf_counter()
        while True:
            be.advance((calls + 1) * k * DT, DT, k, stim, check=False)
            calls += 1
            if calls % 4 == 0 or n * k >= 10**8:
                be.synchronize()
                if time.perf_counter() - t0 >= min_seconds:
                    break
        be.synchronize()
        wall = time.perf_counter() - t0
        be.check(0.0, DT)
        regs = be.registers()
    return {"variant": variant, "cells": n, "k": k, "calls": calls, "wall_s": wall,
            "cell_steps_per_s": n * k * calls / wall, "registers": regs["num_regs"],
            "local_bytes": regs["local_size_bytes"]}


def numpy_one_core(model, n=10_000, steps=20) -> float:
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.numpy_backend import NumpyBackend

    class _NoStim:
        @staticmethod
        def current(t):
            return 0.0
    be = NumpyBackend(model, model.initial_state(n), np.zeros((n, 1)))
    be.advance(0.0, DT, 1, _NoStim)
    t0 = time.perf_counter()
    be.advance(0.0, DT, steps, _NoStim)
    return n * steps / (time.perf_counter() - t0)


def bytes_per_step(variant, k, n_states) -> float:
    per_launch = 2 * n_states * 8 * (2 if variant.aux else 1)
    return per_launch / (k if variant.fused else 1)


def markdown(meta, rows, names) -> str:
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode import kernel_variants
    bw, rate, ins = meta["copy_bandwidth_Bps"], meta["fp64_issue_rate"], meta["fp64_instructions_per_step"]
    compute = rate / ins if rate and ins else None
    lines = ["### Cell kernels: every variant, Bondarenko (41 states, FP64)", "",
             f"{meta['date']} · {meta['machine']['gpu']} · host {meta['machine']['cpu']} · one GPU, one process · "
             f"`{meta['command']}`", "",
             f"Measured copy bandwidth {bw / 1e12:.2f} TB/s (read + write). Compute ceiling: "
             + (f"{rate:.2g} FP64 instructions/s (docs/dev/design.md §8) / {ins} FP64 instructions per step (PTX of the "
                f"fused kernel) = **{compute:.2g} cell-steps/s**." if compute else "n/a (GPU not in the table).")
             + f" Peer: {PEER}. Target for the fused kernel: ≥ {TARGET:.0e} at 10⁶ cells.", "",
             "| variant | registers | spills (B) | cells | k | cell-steps/s | × original | bandwidth ceiling | "
             "% of min(ceilings) |",
             "|---|---|---|---|---|---|---|---|---|"]
    base = {(r["cells"], r["k"]): r["cell_steps_per_s"] for r in rows if r["variant"] == "original"}
    for name in names:
        v = kernel_variants.VARIANTS[name]
        for r in (r for r in rows if r["variant"] == name):
            ceil_bw = bw / bytes_per_step(v, r["k"], 41)
            ceiling = min(ceil_bw, compute) if compute else ceil_bw
            ratio = r["cell_steps_per_s"] / base[(r["cells"], r["k"])] if (r["cells"], r["k"]) in base else None
            lines.append(f"| {name} | {r['registers']} | {r['local_bytes']} | {r['cells']:.0e} | {r['k']} | "
                         f"{r['cell_steps_per_s']:.3g} | {f'{ratio:.2f}' if ratio else '–'} | {ceil_bw:.3g} | "
                         f"{100 * r['cell_steps_per_s'] / ceiling:.0f} % |")
    lines += ["", f"NumPy reference backend, one core of the host, 10⁴ cells: {meta['numpy_one_core']:.3g} "
                  "cell-steps/s.", ""]
    return "\n".join(lines)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode import kernel_variants
    p = argparse.ArgumentParser(prog="python -m cardiosim.bench.kernels", description=__doc__.split("\n")[0])
    p.add_argument("--variants", nargs="+", default=list(kernel_variants.VARIANTS))
    p.add_argument("--cells", type=float, nargs="+", default=[1e5, 1e6, 1e7])
    p.add_argument("--k", type=int, nargs="+", default=[1, 100])
    p.add_argument("--seconds", type=float, default=0.3, help="minimum timed wall time per case")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the results here too")
    args = p.parse_args(argv)
    try:
        import pycuda.driver  # noqa: F401 - whether PyCUDA is there
    except ImportError:
        print("cardiosim bench kernels: needs PyCUDA and a GPU (EXTRAS=test,plot,gpu make setup)", file=sys.stderr)
        return 2
    model = make("bondarenko", "apical")
    ctx = PrimaryContext(0)
    ctx.push()
    try:
        bw = copy_bandwidth()
    finally:
        ctx.pop()
    gpu = machine()["gpu"]
    rate = next((r for name, r in FP64_ISSUE_RATE.items() if name in gpu), None)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench kernels " + " ".join(argv), "copy_bandwidth_Bps": bw,
            "fp64_issue_rate": rate, "fp64_instructions_per_step": fp64_instructions_per_step(model),
            "numpy_one_core": numpy_one_core(model)}
    print(f"copy bandwidth {bw / 1e12:.2f} TB/s; {meta['fp64_instructions_per_step']} FP64 instructions per step; "
          f"NumPy one core {meta['numpy_one_core']:.3g} cell-steps/s", flush=True)
    rows = []
    for name in args.variants:
        for n in (int(c) for c in args.cells):
            for k in args.k:
                r = measure(model, name, n, k, args.seconds)
                rows.append(r)
                print(f"{name:>16} {n:>9} cells k = {k:>3}: {r['cell_steps_per_s']:.3g} cell-steps/s "
                      f"({r['registers']} regs)", flush=True)
    publish(markdown(meta, rows, args.variants), meta, rows, args.json, args.write,
            "kernels:" + meta["machine"]["gpu"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
