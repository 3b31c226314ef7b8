"""Cell-steps per second of the native C backend (one CPU core) for the generated CellML models, with and without
the generator's common subexpressions and reciprocals (cardiosim/cells/cse.py), beside the hand-written twins.

    cardiosim bench cell-steps [--models NAME ...] [--cells 1000] [--steps 200] [--repeats 5] [--write PAGE]
                               [--ptx [ARCH]]

Both forms of a model are compiled from the same generator (``cellml.generate(cse=False)`` writes the equations as
Myokit has them), specialised to the same run (constants folded) and timed alternately, best of ``--repeats`` each, so
that a shared machine's load falls on both alike. Cells at rest, no stimulus, dt = 1 µs; the rate is cells × steps /
wall time of one ``cs_advance`` call (the driver's per-substep finiteness check included).

``--ptx``: also what the GPU would run, without a GPU: each form in the fused kernel (``kernel_source``) through
nvcc (sm_90 unless named), ptxas's registers and spills and the PTX's FP64 instructions and divisions
(``div.rn.f64``, each a Newton–Raphson sequence in SASS; exp and log are inlined sequences nvcc already merges
where they repeat).
"""

from __future__ import annotations

import argparse
import datetime
import sys
import time

import numpy as np

from cardiosim.cells.cellml import MODELS
from cardiosim.bench.launch import machine, publish
from cardiosim import cells
from cardiosim.cells import cellml
from cardiosim.runtime.compile import kernel_dir

DEFAULT = ("ten_tusscher_model_2006_epi", "ohara_rudy_2011_endo", "courtemanche_ramirez_nattel_1998",
           "bondarenko_szigeti_bett_kim_rasmusson_2004_apical")
HAND = {"ten_tusscher_model_2006_epi": "tt06", "bondarenko_szigeti_bett_kim_rasmusson_2004_apical": "bondarenko"}
INTEGRATORS = ("forward-euler", "rush-larsen", "grl1")


def _rate(nat, model, n: int, k: int) -> float:
    y = np.ascontiguousarray(model.initial_state(n))
    t = time.perf_counter()
    nat.advance(y, 0.0, 1e-3, k, check_range=False)
    return n * k / (time.perf_counter() - t)


def measure(names, n: int, k: int, repeats: int) -> list[dict]:
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    from cardiosim.reaction.ode.native import STEP_SUFFIX as STEP, NativeModel
    rows = []
    for name in names:
        path = MODELS / f"{name}.cellml"
        model = cells.model_class(str(path))()
        plain = cellml.fold_constants(model, cellml.generate(path, cse=False)["c_header"])
        hand = cells.make(HAND[name]) if name in HAND else None
        for integrator in INTEGRATORS:
            forms = {"cse": NativeModel(model, integrator=integrator),
                     "plain": NativeModel(model, header_text=plain, integrator=integrator)}
            if hand is not None and f"{hand.kernel_name}{STEP.get(integrator, '_rhs')}(" in \
                    (kernel_dir() / f"{hand.kernel_name}.h").read_text():
                forms["hand"] = NativeModel(hand, integrator=integrator)
            best = dict.fromkeys(forms, 0.0)
            for f, nat in forms.items():                       # warm-up: page faults, first calls
                _rate(nat, model if f != "hand" else hand, n, 5)
            for _ in range(repeats):
                for f, nat in forms.items():
                    best[f] = max(best[f], _rate(nat, model if f != "hand" else hand, n, k))
            row = {"model": name, "integrator": integrator, **{f"{f}_steps_per_s": v for f, v in best.items()},
                   "speed-up": best["cse"] / best["plain"]}
            rows.append(row)
            print(f"{name:52s} {integrator:14s} plain {best['plain']:.3e}  cse {best['cse']:.3e}  "
                  f"x{row['speed-up']:.2f}" + (f"  hand {best['hand']:.3e}" if "hand" in best else ""),
                  file=sys.stderr, flush=True)
    return rows


def ptx_counts(names, arch: str) -> list[dict]:
    """Registers, spills, FP64 PTX instructions and divisions of the fused kernel per model, integrator and form."""
    # lazy: cardiosim.reaction imports mpi4py, which this module does not
    import re
    import shutil
    import subprocess
    import tempfile
    from pathlib import Path
    from cardiosim.reaction.ode import kernel_variants
    from cardiosim.reaction.ode.cuda_backend import kernel_source
    from cardiosim.reaction.ode.ptxas import parse
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        raise SystemExit("cardiosim bench cell-steps --ptx: nvcc is not on PATH")
    rows = []
    with tempfile.TemporaryDirectory(prefix="cardiosim-ptx-") as tmp:
        for name in names:
            path = MODELS / f"{name}.cellml"
            cse_model = cells.model_class(str(path))()
            plain_model = cells.model_class(str(path))()
            folder = Path(tmp) / name
            folder.mkdir()
            (folder / f"{plain_model.kernel_name}.h").write_text(
                cellml.fold_constants(plain_model, cellml.generate(path, cse=False)["c_header"]))
            plain_model.kernel_header_dir = folder
            for integrator in INTEGRATORS:
                row = {"model": name, "integrator": integrator}
                for form, model in (("plain", plain_model), ("cse", cse_model)):
                    src, opts = kernel_source(model, model.parameter_vector(),
                                              kernel_variants.get("fused", model.kernel_name), integrator)
                    cu = Path(tmp) / "k.cu"
                    cu.write_text(src)
                    inc = [f"-I{model.kernel_header_dir}", f"-I{kernel_dir()}"]
                    r = subprocess.run([nvcc, "-ptx", f"-arch={arch}", *inc, *opts, "-o", str(cu.with_suffix(".ptx")),
                                        str(cu)], capture_output=True, text=True)
                    if r.returncode:
                        raise SystemExit(f"nvcc failed for {name} ({form}, {integrator}):\n{r.stderr[-2000:]}")
                    ptx = cu.with_suffix(".ptx").read_text()
                    r = subprocess.run([nvcc, "-cubin", f"-arch={arch}", "-Xptxas", "-v", *inc, *opts, "-o",
                                        str(cu.with_suffix(".cubin")), str(cu)], capture_output=True, text=True)
                    rep = parse(r.stderr + r.stdout)
                    row[form] = {"registers": rep["registers"], "spills": rep.get("spill_stores", 0),
                                 "f64": len(re.findall(r"^\s+(?:@!?%p\d+ )?\w+(?:\.\w+)*\.f64", ptx, re.M)),
                                 "div": ptx.count("div.rn.f64")}
                rows.append(row)
                print(f"{name:52s} {integrator:14s} {row['plain']} -> {row['cse']}", file=sys.stderr, flush=True)
    return rows


def markdown(rows, meta) -> str:
    out = ["### Generated cell models on one CPU core: common subexpressions and reciprocals", "",
           f"{meta['date']} · {meta['cpu']} ({meta['cores']} cores, shared) · native C backend (gcc -O2), one process"
           f" · {meta['cells']} cells × {meta['steps']} steps of 1 µs at rest, best of {meta['repeats']}, the forms"
           f" timed alternately · `{meta['command']}`", "",
           "| model | integrator | Myokit's form (cell-steps/s) | with CSE + reciprocals | speed-up | hand twin |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        hand = f"{r['hand_steps_per_s']:.3g}" if "hand_steps_per_s" in r else "—"
        out.append(f"| {r['model']} | {r['integrator']} | {r['plain_steps_per_s']:.3g} | {r['cse_steps_per_s']:.3g}"
                   f" | {r['speed-up']:.2f}× | {hand} |")
    if meta.get("ptx"):
        out += ["", f"The fused kernel for the GPU ({meta['arch']}, nvcc {meta['nvcc']}, FMA on; compiled here, not run):"
                " registers, spill stores (B), FP64 instructions and divisions (div.rn.f64) in the PTX of one launch"
                " (the loop body once).", "",
                "| model | integrator | Myokit's form: registers / spills / FP64 / div | with CSE + reciprocals |",
                "|---|---|---|---|"]
        for r in meta["ptx"]:
            f = lambda x: f"{x['registers']} / {x['spills']} / {x['f64']} / {x['div']}"   # noqa: E731
            out.append(f"| {r['model']} | {r['integrator']} | {f(r['plain'])} | {f(r['cse'])} |")
    return "\n".join(out) + "\n"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cardiosim bench cell-steps", description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(DEFAULT), help="model file names in models/, without .cellml")
    p.add_argument("--cells", type=int, default=1000)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the rows here too")
    p.add_argument("--ptx", nargs="?", const="sm_90", default=None, metavar="ARCH",
                   help="also compile each form for the GPU with nvcc and count registers, spills, FP64, divisions")
    a = p.parse_args(argv)
    for name in a.models:
        if not (MODELS / f"{name}.cellml").is_file():
            print(f"cardiosim bench cell-steps: no model {MODELS / name}.cellml", file=sys.stderr)
            return 2
    ptx = ptx_counts(a.models, a.ptx) if a.ptx else None
    rows = measure(a.models, a.cells, a.steps, a.repeats)
    meta = {**machine(), "date": datetime.date.today().isoformat(), "cells": a.cells, "steps": a.steps,
            "repeats": a.repeats, "command": "cardiosim bench cell-steps " + " ".join(argv or sys.argv[1:]),
            "ptx": ptx, "arch": a.ptx, "nvcc": _nvcc_version() if a.ptx else None}
    publish(markdown(rows, meta), meta, rows, a.json, a.write, "cell-steps")
    return 0


def _nvcc_version() -> str:
    import re
    import subprocess
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout
    m = re.search(r"release ([\d.]+)", out)
    return m.group(1) if m else "?"


if __name__ == "__main__":
    sys.exit(main())
