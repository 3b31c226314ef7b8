"""``cardiosim kernels``: every CUDA kernel variant of a cell model compiled fresh, ptxas's figures
(cardiosim.reaction.ode.ptxas); ``--source``: the generated CUDA source."""

from __future__ import annotations

import json
from pathlib import Path

from cardiosim.cli import common
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.files import Target, check_writes

START = common.MPI


def add_parser(sub) -> None:
    k = sub.add_parser("kernels", help="compile every CUDA kernel variant fresh and print ptxas's registers, spills, "
                                       "local and constant memory (needs nvcc)")
    k.add_argument("--model", default="bondarenko", help="cell model (default bondarenko)")
    k.add_argument("--variant", action="append", default=[], help="a variant (repeatable; default: all the model has)")
    k.add_argument("--arch", default=None, help="target, e.g. sm_90 (default: the GPU nvidia-smi reports)")
    k.add_argument("--no-fmad", action="store_true", help="compile without fused multiply-adds")
    k.add_argument("--json", default=None, help="also write the figures as JSON here")
    k.add_argument("--overwrite", action="store_true", help="replace an existing --json file")
    k.add_argument("--source", metavar="VARIANT", default=None,
                   help="print the generated CUDA source of VARIANT (and its nvcc -D options) instead; no nvcc needed")


def main(args) -> int:
    common.start_petsc(args)
    from cardiosim import cells   # lazy: NumPy, when it runs
    from cardiosim.reaction.ode import kernel_variants, ptxas   # lazy: as cells
    from cardiosim.reaction.ode.cuda_backend import kernel_source   # lazy: as cells
    try:
        model = cells.make(args.model)
    except cells.CellModelError as e:
        raise UserError(f"cardiosim kernels: --model: {e}") from None
    if not model.kernel_name:
        raise UserError(f"cardiosim kernels: --model: {args.model} has no C/CUDA kernel")
    if args.json:
        check_writes([Target("--json", Path(args.json), "kernels-json")], {}, args.overwrite)
    seed = model.kernel_name in kernel_variants.SEED_MODELS
    names = args.variant or (list(kernel_variants.VARIANTS) if seed else [kernel_variants.DEFAULT])
    if args.source:
        names = [args.source]
    try:
        variants = [kernel_variants.get(n, model.kernel_name) for n in names]
    except ValueError as e:
        raise UserError(f"cardiosim kernels: {e}") from None
    if args.source:
        src, opts = kernel_source(model, model.parameter_vector(), variants[0])
        print(f"// nvcc options: {' '.join(opts)}\n{src}")
        return 0
    rows = ptxas.report(model, names, args.arch, fmad=not args.no_fmad)
    print(f"{model.name}, {rows[0]['arch']}, fmad={'off' if args.no_fmad else 'on'}, compiled fresh by nvcc:")
    print(ptxas.table(rows), end="")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0
