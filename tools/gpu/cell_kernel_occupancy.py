"""The fused Forward-Euler cell kernel under register caps and block sizes: registers, spills, warps, throughput.

    python3 tools/gpu/cell_kernel_occupancy.py ptxas [--caps 0 192 168 128] [--arch sm_90]   (nvcc only, no GPU)
    python3 tools/gpu/cell_kernel_occupancy.py time  [--caps 0 168 128] [--blocks 128 256]   (one GPU, PyCUDA)
    python3 tools/gpu/cell_kernel_occupancy.py static [--models ...] [--json FILE]   (nvcc + nvdisasm, no GPU)

``ptxas``: each model's fused kernel compiled as the CUDA backend compiles it (kernel_source + nvcc_options, fmad
on) with ``-maxrregcount`` = each cap (0: none, ptxas's own choice), ptxas -v's registers, spill stores/loads and
stack frame, and the resident warps per SM on sm_90 (cuda_backend.warps_per_sm) for blocks of 128 and 256 threads.

``static``: the hand-written and generated twins side by side as the backend compiles them (fused Forward Euler,
the automatic register cap of cuda_backend.auto_cap at block 128, fmad on; ``--caps`` adds fixed caps, 0 = none):
FP64 instructions of the kernel body in SASS (cardiosim.bench.kernels.sass_fp64: DFMA/DADD/DMUL/DSETP/MUFU.*64H/...,
the $__internal slow-path subroutines left out; nvdisasm from PATH, $CARDIOSIM_NVDISASM or pip's
nvidia-cuda-nvdisasm), the same in PTX as ``cardiosim bench kernels`` counts it (a div.rn.f64 as 10), div.rn.f64 and
ex2/lg2 approximations in PTX, registers, spill stores/loads and stack frame. A generated kernel against its
hand-written twin: these figures' ratios until a GPU times them.

``time``: the throughput loop of tests/test_cellml_gpu.py::test_cell_steps_per_second (2^20 cells at rest, k = 100
substeps per launch, 10 launches after a warm-up launch, dt = 1e-4 ms for Bondarenko and 1e-3 ms otherwise), best of
``--repeats``, for each model, cap and block size, the cap set through $CARDIOSIM_CELL_MAXRREG and the block through
$CARDIOSIM_CELL_BLOCK (the run-time switches of cuda_backend), so that the path production takes is the one timed.
After the timed launches every configuration's states are compared with the first one's (no cap, first block):
a register cap changes ptxas's allocation and scheduling, not the arithmetic, so they should agree bit for bit.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

MODELS = {"tt06 (hand)": "tt06", "bondarenko (hand)": "bondarenko",
          "ord2011 (generated)": str(ROOT / "models" / "ohara_rudy_2011_endo.cellml"),
          "tt06 (generated)": str(ROOT / "models" / "ten_tusscher_model_2006_epi.cellml"),
          "bondarenko (generated)": str(ROOT / "models" / "bondarenko_szigeti_bett_kim_rasmusson_2004_apical.cellml"),
          "courtemanche (generated)": str(ROOT / "models" / "courtemanche_ramirez_nattel_1998.cellml")}
TWINS = ["tt06 (hand)", "tt06 (generated)", "bondarenko (hand)", "bondarenko (generated)"]


def load(spec: str):
    from cardiosim import cells
    return cells.model_class(spec)() if spec.endswith(".cellml") else cells.make(spec)


def ptxas_table(names, caps, arch) -> str:
    from cardiosim.reaction.ode import ptxas
    from cardiosim.reaction.ode.cuda_backend import warps_per_sm
    lines = ["| model | cap | registers | spill stores (B) | spill loads (B) | stack (B/thread) "
             "| warps/SM, block 128 | warps/SM, block 256 |", "|---|---|---|---|---|---|---|---|"]
    for name in names:
        model = load(MODELS[name])
        for cap in caps:
            r = ptxas.report(model, ["fused"], arch, fmad=True, maxrreg=cap)[0]
            regs = r["registers"]
            lines.append(f"| {name} | {cap or 'none'} | {regs} | {r.get('spill_stores', 0)} | {r.get('spill_loads', 0)}"
                         f" | {r.get('stack_frame', 0)} | {warps_per_sm(regs, 128)} "
                         f"| {warps_per_sm(regs, 256)} |")
            print(lines[-1], file=sys.stderr, flush=True)
    return "\n".join(lines) + "\n"


def static_rows(names, caps, arch) -> list[dict]:
    """One dict per model and cap (None: the automatic cap) with :func:`static_table`'s figures."""
    import re
    from cardiosim.bench.kernels import ptx_fp64, sass_fp64
    from cardiosim.reaction.ode import ptxas
    rows = []
    for name in names:
        model = load(MODELS[name])
        ptx = ptxas.nvcc(model, "fused", "-ptx", arch)[0].decode()
        body = ptx[ptx.index(".entry cs_fused_euler"):]
        for cap in caps:
            r = ptxas.report(model, ["fused"], arch, fmad=True, maxrreg=cap, keep_cubin=True)[0]
            rows.append({"model": name, "cap": r.get("maxrreg") or "none", "registers": r["registers"],
                         "spill_stores": r.get("spill_stores", 0), "spill_loads": r.get("spill_loads", 0),
                         "stack": r.get("stack_frame", 0), **{"sass_" + k: v for k, v in sass_fp64(r["cubin"]).items()},
                         "ptx_fp64": ptx_fp64(ptx), "ptx_div": len(re.findall(r"^\s*div\.rn\.f64", body, flags=re.M)),
                         "ptx_ex2_lg2": len(re.findall(r"^\s*(?:ex2|lg2)\.approx", body, flags=re.M))})
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def static_table(rows) -> str:
    lines = ["| model | cap | registers | spill st/ld (B) | stack (B) | SASS FP64 (DFMA/DADD/DMUL/MUFU) | SASS calls "
             "| SASS instr. | PTX FP64 | PTX div | × hand SASS FP64 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    hand: dict = {}
    for r in rows:
        if "hand" in r["model"]:
            hand.setdefault(r["model"].split(" ")[0], r["sass_fp64"])
    for r in rows:
        h = hand.get(r["model"].split(" ")[0])
        ratio = f"{h / r['sass_fp64']:.3f}" if h and "generated" in r["model"] else ""
        lines.append(f"| {r['model']} | {r['cap']} | {r['registers']} | {r['spill_stores']}/{r['spill_loads']} "
                     f"| {r['stack']} | {r['sass_fp64']} ({r['sass_dfma']}/{r['sass_dadd']}/{r['sass_dmul']}/"
                     f"{r['sass_mufu']}) | {r['sass_calls']} | {r['sass_instructions']} | {r['ptx_fp64']} "
                     f"| {r['ptx_div']} | {ratio} |")
    return "\n".join(lines) + "\n\n(× hand: the hand twin's FP64 count over the generated one's, the first cap row of each)\n"


def time_one(model, dt, n, k, launches, repeats):
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    from cardiosim.reaction.ode.cuda_backend import warps_per_sm
    with CudaBackend(model, model.initial_state(n)) as be:
        be.advance(0.0, dt, k)                          # warm-up (and the module load)
        be.synchronize()
        best, t = 0.0, k * dt
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(launches):
                be.advance(t, dt, k, check=False)
                t += k * dt
            be.synchronize()
            best = max(best, n * k * launches / (time.perf_counter() - t0))
        be.check(0.0, dt)
        regs = be.registers()
        y = be.from_device()
        return {"rate": best, "registers": regs["num_regs"], "local": regs["local_size_bytes"], "block": be.block,
                "warps": warps_per_sm(regs["num_regs"], be.block), "y": y}


def _cap(cap: int) -> str:
    return "auto" if cap < 0 else str(cap) if cap else "none"


def time_table(names, caps, blocks, n, k, launches, repeats) -> str:
    import shutil
    import subprocess
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                         text=True).stdout.strip().splitlines() if shutil.which("nvidia-smi") else []
    lines = [f"GPU: {gpu[0] if gpu else '?'}; 2^{n.bit_length() - 1} cells, k = {k}, {launches} launches, best of "
             f"{repeats}; fmad on", "",
             "| model | cap | block | registers | local (B/thread) | warps/SM | cell-steps/s | x no cap, block 128 "
             "| states = reference |", "|---|---|---|---|---|---|---|---|---|"]
    for name in names:
        model = load(MODELS[name])
        dt = 1e-4 if "bondarenko" in name else 1e-3
        ref = base = None
        for cap in caps:
            for block in blocks:
                if cap < 0:                             # -1: the backend's automatic cap, as production runs
                    os.environ.pop("CARDIOSIM_CELL_MAXRREG", None)
                else:
                    os.environ["CARDIOSIM_CELL_MAXRREG"] = str(cap) if cap else "none"     # 0: no cap
                os.environ["CARDIOSIM_CELL_BLOCK"] = str(block)
                try:
                    r = time_one(model, dt, n, k, launches, repeats)
                except Exception as e:                  # one configuration failing must not lose the table
                    lines.append(f"| {name} | {_cap(cap)} | {block} | failed: {str(e).splitlines()[0][:80]} "
                                 f"| | | | | |")
                    print(lines[-1], file=sys.stderr, flush=True)
                    continue
                if ref is None:
                    ref, base = r["y"], r["rate"]
                same = "bitwise" if np.array_equal(r["y"], ref) else \
                    f"max |diff| {np.nanmax(np.abs(r['y'] - ref)):.1e}"
                lines.append(f"| {name} | {_cap(cap)} | {block} | {r['registers']} | {r['local']} | {r['warps']} "
                             f"| {r['rate']:.3e} | {r['rate'] / base:.2f} | {same} |")
                print(lines[-1], file=sys.stderr, flush=True)
    os.environ.pop("CARDIOSIM_CELL_MAXRREG", None)
    os.environ.pop("CARDIOSIM_CELL_BLOCK", None)
    return "\n".join(lines) + "\n"


def loop_arguments(p) -> None:
    """The throughput loop's options (also tools/gpu/myokit_peer.py's, which times its kernel the same way)."""
    p.add_argument("--arch", default="sm_90")
    p.add_argument("--cells", type=int, default=1 << 20)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--launches", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("what", choices=("ptxas", "time", "static"))
    p.add_argument("--models", nargs="+", default=None, choices=list(MODELS),
                   help="default: the first three (ptxas, time); the four twins (static)")
    p.add_argument("--json", help="static: write the rows here too")
    p.add_argument("--caps", nargs="+", type=int, default=None,
                   help="register caps, 0 = none, -1 = the backend's automatic cap (time)")
    p.add_argument("--blocks", nargs="+", type=int, default=[128, 256])
    loop_arguments(p)
    a = p.parse_args(argv)
    if a.what == "static":
        caps = [None] + [c for c in (a.caps or [])]
        rows = static_rows(a.models or TWINS, caps, a.arch)
        if a.json:
            import json
            Path(a.json).write_text(json.dumps(rows, indent=1) + "\n")
        print(static_table(rows), end="")
        return 0
    a.models = a.models or list(MODELS)[:3]
    if a.what == "ptxas":
        print(ptxas_table(a.models, a.caps or [0, 192, 168, 128], a.arch), end="")
    else:
        print(time_table(a.models, a.caps or [0, 168, 128], a.blocks, a.cells, a.k, a.launches, a.repeats), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
