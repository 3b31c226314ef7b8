"""``cardiosim cell``: a single cell paced (cardiosim.single_cell.pacing), its S1-S2 restitution or a population
of cells (cardiosim.single_cell.population); traces and per-beat biomarkers to HDF5 (and JSON, CSV)."""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

from cardiosim import __version__
from cardiosim.cli import common
from cardiosim.runtime.errors import UserError, io_reason
from cardiosim.runtime.files import Target, check_writes, whole, write_h5

START = common.MPI


def add_parser(sub) -> None:
    cell = sub.add_parser("cell", help="pace a single cell; trace and per-beat biomarkers to HDF5 (and JSON)",
                          formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    cell.add_argument("--list", action="store_true", help="list the cell models and their variants")
    cell.add_argument("--model", default="bondarenko", help="cell model (see --list), or a CellML file (*.cellml)")
    cell.add_argument("--variant", default=None, help="model variant (bondarenko: apical | septal)")
    cell.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                      help="override a model parameter (model units; also Cm, chi where the model uses them), "
                           "repeatable")
    cell.add_argument("--amplitude", type=float, default=-80.0, help="stimulus, pA/pF (negative depolarises)")
    cell.add_argument("--duration", type=float, default=0.5, help="stimulus duration, ms")
    cell.add_argument("--period", type=float, default=1000.0, help="pacing period, ms")
    cell.add_argument("--beats", type=int, default=1, help="number of beats")
    cell.add_argument("--dt", type=float, default=1e-4, help="the integrator's step, ms (cvode takes its own)")
    cell.add_argument("--integrator", default="forward-euler",
                      choices=("forward-euler", "rush-larsen", "grl1", "cvode"),
                      help="forward-euler; rush-larsen (gates exact for frozen V; tt06, CellML models); grl1 (every "
                           "state by its own linearisation; CellML models); cvode (Myokit's CVODES; CellML models)")
    cell.add_argument("--prepace", type=int, default=0, metavar="N", help="pace N beats first, not recorded")
    cell.add_argument("--scale", action="append", default=[], metavar="NAME=FACTOR",
                      help="multiply a parameter by FACTOR (e.g. GKr=0.5), repeatable")
    cell.add_argument("--block", action="append", default=[], metavar="NAME=IC50[:HILL]",
                      help="drug block of a conductance: scaled by 1/(1 + (C/IC50)^HILL) with C = --concentration "
                           "(same unit as IC50; HILL default 1), repeatable")
    cell.add_argument("--concentration", default=None, metavar="C[,C,...]",
                      help="drug concentration for --block (same unit as the IC50); two or more, comma-separated: "
                           "a concentration-response series, the paced cell at each, its last beat's biomarkers "
                           "to --output (/concentration) and --json")
    cell.add_argument("--restitution", default=None, metavar="CI,CI,...",
                      help="S1-S2 restitution instead of a paced trace: --prepace S1 beats every --period, then for "
                           "each coupling interval CI (ms) an S1 and an S2; APD90 of S2 against the diastolic "
                           "interval, to --output (/restitution) and --json")
    cell.add_argument("--population", type=int, default=None, metavar="N",
                      help="a population of N cells, each with its own scale factors (--sample or "
                           "--population-table): biomarkers of the last beat per cell to --output and --csv")
    cell.add_argument("--sample", action="append", default=[], metavar="NAME=uniform:LO:HI|NAME=lognormal:SIGMA",
                      help="population: how a parameter's scale factor is drawn, repeatable")
    cell.add_argument("--seed", type=int, default=1, help="population: random seed of --sample")
    cell.add_argument("--population-table", default=None, metavar="CSV",
                      help="population: the factors from a table (header: parameter names; a row per cell)")
    cell.add_argument("--keep", action="append", default=[], metavar="BIOMARKER=LO:HI",
                      help="population: calibration filter, e.g. APD90=200:300 (a cell is kept where all hold)")
    cell.add_argument("--csv", default=None, help="population: also write the per-cell table here")
    cell.add_argument("--backend", choices=("native", "cuda"), default="native",
                      help="population: where the cells run: native (the C driver, one core) or cuda (one GPU, "
                           "CellML models: the varied parameters per cell in device memory)")
    cell.add_argument("--trace", action="append", default=[], metavar="NAME",
                      help="also record this intermediate (a current, a flux: `cardiosim model info` lists them; "
                           "CellML models), repeatable")
    cell.add_argument("--record-every", type=float, default=0.05, help="trace sampling interval, ms")
    cell.add_argument("--output", default="out/cell.h5", help="HDF5 file")
    cell.add_argument("--json", default=None, help="also write the biomarkers as JSON here")
    cell.add_argument("--overwrite", action="store_true", help="replace existing output files")
    cell.add_argument("--quiet", action="store_true", help="no progress lines")


def main(args) -> int:
    common.start_petsc(args)
    from cardiosim import cells   # lazy: NumPy, when it runs
    from cardiosim.runtime import log   # lazy: loads MPI
    from cardiosim.analysis.biomarkers import format_table   # lazy: NumPy
    if args.comm.size > 1:
        raise UserError("cardiosim cell: runs one cell; start it without mpirun")
    if args.list:
        for name in cells.available():
            cls = cells.model_class(name)
            variants = f" (variants: {', '.join(cls.variants)})" if cls.variants else ""
            log.info(f"{name}: {len(cls.states)} states{variants}")
        from cardiosim.cells import cellml   # lazy: as cells
        log.info(f"CellML models shipped in {cellml.MODELS} (--model FILE; any other CellML file too):")
        for row in cellml.shipped():
            meta = row["meta"]
            what = (f"{len(meta['states'])} states, {len(meta['gates'])} gates" if meta else
                    "generated on first use")
            log.info(f"  {row['path'].name}: {what}")
        return 0
    overrides = {}
    for item in args.param:
        name, sep, value = item.partition("=")
        try:
            overrides[name.strip()] = float(value)
        except ValueError:
            sep = ""
        if not sep or not name.strip():
            raise UserError(f"cardiosim cell --param {item}: expected NAME=NUMBER")
        if not math.isfinite(overrides[name.strip()]):
            raise UserError(f"cardiosim cell --param {item}: must be a finite number")
    concentrations = _concentrations(args)
    series = len(concentrations) > 1
    scale, blocks = {}, {}
    for opt, item in [("--scale", x) for x in args.scale] + [("--block", x) for x in args.block]:
        name, sep, value = item.partition("=")
        name = name.strip()
        try:
            if opt == "--scale":
                f = float(value)
            else:
                if not concentrations:
                    raise UserError("cardiosim cell --block: needs --concentration (same unit as the IC50)")
                ic50, _, hill = value.partition(":")
                from cardiosim.single_cell.pacing import block_factor   # lazy: NumPy
                f = block_factor(concentrations[0], float(ic50), float(hill) if hill else 1.0)
                blocks[name] = (float(ic50), float(hill) if hill else 1.0)
        except ValueError as e:
            raise UserError(f"cardiosim cell {opt} {item}: expected "
                            f"{'NAME=FACTOR' if opt == '--scale' else 'NAME=IC50[:HILL], IC50 and HILL > 0'}"
                            f"{'' if 'could not convert' in str(e) else f' ({e})'}") from None
        if not sep or not name or not math.isfinite(f) or f < 0:
            raise UserError(f"cardiosim cell {opt} {item}: expected NAME=FACTOR with a finite factor >= 0")
        if not (series and opt == "--block"):        # a series scales by each concentration's block itself
            scale[name] = scale.get(name, 1.0) * f
    if series and not blocks:
        raise UserError(f"cardiosim cell --concentration {args.concentration}: a series needs at least one --block "
                        f"NAME=IC50[:HILL]")
    if args.prepace < 0:
        raise UserError(f"cardiosim cell --prepace {args.prepace}: a number of beats >= 0")
    from cardiosim.cells import cellml   # lazy: as cells
    targets = [Target("--output", Path(args.output), "cell")]
    if args.json:
        targets.append(Target("--json", Path(args.json), "cell-json"))
    if args.csv:
        targets.append(Target("--csv", Path(args.csv), "population-csv"))
    check_writes(targets, {"--model": args.model} if cellml.is_cellml(args.model) else {}, args.overwrite)
    from cardiosim.single_cell.pacing import run_cell   # lazy: NumPy
    last = [time.perf_counter()]

    def progress(t, total):   # a line every 5 s of wall time: runs of many beats take minutes
        now = time.perf_counter()
        if not args.quiet and now - last[0] >= 5.0:
            last[0] = now
            if t <= 0:          # pre-pacing: t counts down to the first recorded beat
                log.info(f"pre-pacing: {-t / args.period:.0f} of {args.prepace} beats left")
            else:
                log.info(f"t = {t:.6g} / {total:.6g} ms ({100 * t / total:5.1f} %)")
    try:
        Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cardiosim cell: --output {args.output}: cannot make its folder ({io_reason(e)})") from None
    try:
        from cardiosim.single_cell.pacing import scaled   # lazy: NumPy
        overrides = scaled(args.model, args.variant, overrides, scale)     # --scale and --block, once for all
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    if args.backend != "native" and args.population is None and not args.population_table:
        raise UserError(f"cardiosim cell: --backend {args.backend} is for populations (--population N); one cell "
                        f"runs on the CPU")
    if series and (args.restitution is not None or args.population is not None or args.population_table):
        raise UserError(f"cardiosim cell --concentration {args.concentration}: a series paces one cell at each "
                        f"concentration; not with --restitution, --population or --population-table (give one "
                        f"concentration there)")
    if series:
        return _series(args, overrides, blocks, concentrations)
    if args.restitution is not None:
        return _restitution(args, overrides)
    if args.population is not None or args.population_table:
        return _population(args, overrides)
    try:
        rows = run_cell(args.model, args.variant, overrides, args.amplitude, args.duration, args.period, args.beats,
                        args.dt, args.record_every, args.output, args.json, progress=progress,
                        integrator=args.integrator, prepace=args.prepace, trace=tuple(args.trace))
    except ValueError as e:   # bad arguments, found before any file is written
        raise UserError(f"cardiosim cell: {e}") from None
    log.info(format_table(rows))
    log.info(f"wrote {args.output}" + (f" and {args.json}" if args.json else ""))
    return 0


def _population(args, overrides) -> int:
    """``cardiosim cell --population N``: cardiosim.single_cell.population, its table and the kept share."""
    from cardiosim.runtime import log   # lazy: loads MPI
    from cardiosim.single_cell.population import (   # lazy: NumPy
        check_memory, parse_sample, run_population, sample_factors, table_factors)
    try:
        if args.population_table:
            factors = table_factors(args.population_table)
            n, names = len(next(iter(factors.values()))), list(factors)
        else:
            if not args.population or args.population < 1 or not args.sample:
                raise ValueError("--population N needs N >= 1 and at least one --sample (or --population-table)")
            spec = dict(parse_sample(x) for x in args.sample)
            n, names = args.population, list(spec)
        # before the factors are drawn: a population that cannot fit is one line, not minutes and a MemoryError
        need, _ = check_memory(args.model, args.variant, overrides, n, len(names), args.period, args.record_every)
        if not args.population_table:
            factors = sample_factors(spec, n, args.seed)
        keep = {}
        for item in args.keep:
            name, _, rng = item.partition("=")
            lo, _, hi = rng.partition(":")
            try:
                keep[name.strip()] = (float(lo), float(hi))
            except ValueError:
                raise ValueError(f"--keep {item}: expected BIOMARKER=LO:HI, e.g. APD90=200:300") from None
        beats = args.prepace + args.beats
        if not args.quiet:
            log.info(f"population: {n} cells, {beats} beats each "
                     f"({n * beats * round(args.period / args.dt):.3g} cell-steps), about "
                     f"{need / 1e6:.3g} MB of memory; the time left follows from the first second of work")
        t0 = time.perf_counter()
        r = run_population(args.model, args.variant, overrides, factors, args.amplitude, args.duration, args.period,
                           args.beats, args.prepace, args.dt, args.integrator, args.record_every, keep, args.output,
                           args.csv, backend=args.backend, ticks=_ticker(args, n, beats, t0))
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    wall = time.perf_counter() - t0
    n, beats = r["n"], args.prepace + args.beats
    log.info(f"population of {n} cells, {beats} beats each: {r['kept']} kept, {r['failed']} failed; "
             f"{wall:.3g} s ({n * beats * args.period / args.dt / wall:.3g} cell-steps/s "
             f"{'on one GPU' if args.backend == 'cuda' else 'on one core'})")
    log.info(f"wrote {args.output}" + (f" and {args.csv}" if args.csv else ""))
    return 0


def _ticker(args, n: int, beats: int, began: float):
    """run_population's ``ticks``: a progress line after the first second of work, then every 5 s (the cells go
    together: where they are, the rate and the time left), as ``cardiosim run``'s progress lines."""
    from cardiosim.runtime import log   # lazy: loads MPI
    per_beat = max(1, round(args.period / args.dt))
    last = [began, 1.0]                 # when the last line was said, and the wait for the next

    def ticks(done, total):
        now = time.perf_counter()
        if args.quiet or now - last[0] < last[1] or done >= total or done <= 0:
            return
        last[0], last[1] = now, 5.0
        rate = done / (now - began)             # substeps of every cell per second
        log.info(f"population: {n} cells at beat {min(done // per_beat + 1, beats)} of {beats} "
                 f"({100 * done / total:5.1f} %) | {rate * n:.3g} cell-steps/s | ETA {(total - done) / rate:.0f} s")
    return ticks


def _restitution(args, overrides) -> int:
    """``cardiosim cell --restitution CI,...``: the S1-S2 curve (cardiosim.single_cell.pacing.restitution) to
    HDF5/JSON."""
    import numpy as np   # lazy: NumPy, not for every verb's parser
    from cardiosim.runtime import log   # lazy: loads MPI
    from cardiosim.single_cell.pacing import restitution   # lazy: NumPy
    try:
        intervals = [float(x) for x in args.restitution.split(",") if x.strip()]
    except ValueError:
        raise UserError(f"cardiosim cell --restitution {args.restitution}: expected coupling intervals in ms, "
                        f"e.g. 600,400,300") from None
    try:
        rows, t, v = restitution(args.model, args.variant, overrides, args.amplitude, args.duration, args.period,
                                 args.prepace, intervals, args.dt, args.integrator, args.record_every)
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    cols = list(rows[0])

    def fill(f):
        import h5py   # lazy: h5py, not for every verb's parser
        f.attrs.update({"model": str(args.model), "variant": args.variant or "", "overrides": json.dumps(overrides),
                        "amplitude": args.amplitude, "duration": args.duration, "period": args.period,
                        "prepace": args.prepace, "dt": args.dt, "integrator": args.integrator,
                        "cardiosim_version": __version__, "protocol": "S1-S2 restitution"})
        f.create_dataset("trace/t", data=t).attrs["unit"] = "ms"
        f.create_dataset("trace/V", data=v).attrs["unit"] = "mV (one row per coupling interval)"
        f.create_dataset("restitution", data=np.array(
            [tuple(r[c] for c in cols) for r in rows],
            dtype=[(c, h5py.string_dtype() if isinstance(rows[0][c], str) else "f8") for c in cols]
        )).attrs["unit"] = "ms, mV"
    write_h5(args.output, "--output", fill)     # whole or not at all: a full disk is one line, no file left
    if args.json:
        with whole(args.json, "--json") as part:
            part.write_text(json.dumps({"model": str(args.model), "units": "ms (V_peak_S2: mV)",
                                        "restitution": rows, "cardiosim_version": __version__}, indent=1) + "\n")
    log.info("        CI (ms)        DI (ms)  APD90 S2 (ms)  APD90 S1 (ms)  V_peak S2 (mV)")
    for r in rows:        # the five numbers, then why an S2 did not capture (pacing.restitution)
        log.info("".join(f"{r[c]:15.2f}" for c in ("CI", "DI", "APD90_S2", "APD90_S1", "V_peak_S2"))
                 + (f"  {r['reason']}" if r.get("reason") else ""))
    log.info(f"wrote {args.output}" + (f" and {args.json}" if args.json else ""))
    return 0


def _concentrations(args) -> list[float]:
    """--concentration as numbers (none where not given): one, or a comma-separated series, each finite and >= 0."""
    if args.concentration is None:
        return []
    try:
        values = [float(x) for x in args.concentration.split(",") if x.strip()]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(c) and c >= 0 for c in values):
        raise UserError(f"cardiosim cell --concentration {args.concentration}: expected a concentration >= 0 or a "
                        f"comma-separated list of them (same unit as the IC50), e.g. 0,0.1,1")
    return values


def _series(args, overrides, blocks, concentrations) -> int:
    """``cardiosim cell --block ... --concentration C,C,...``: the concentration-response series
    (cardiosim.single_cell.drug) to HDF5/JSON. ``overrides`` hold --param and --scale; the blocks are applied at
    each concentration."""
    from cardiosim.runtime import log   # lazy: loads MPI
    from cardiosim.single_cell.drug import concentration_response   # lazy: NumPy, h5py

    def done(i, n, row):
        if not args.quiet:
            log.info(f"concentration {row['concentration']:g} ({i} of {n}): APD90 {row['APD90']:.4g} ms, "
                     f"V_peak {row['V_peak']:.4g} mV")
    try:
        rows = concentration_response(args.model, args.variant, overrides, {}, blocks, concentrations,
                                      args.amplitude, args.duration, args.period, args.beats, args.prepace, args.dt,
                                      args.integrator, args.record_every, args.output, args.json, done=done)
    except ValueError as e:
        raise UserError(f"cardiosim cell: {e}") from None
    log.info("  concentration     APD90 (ms)     APD50 (ms)   V_peak (mV)   V_rest (mV)")
    for r in rows:
        log.info("".join(f"{r[c]:14.4g}" for c in ("concentration", "APD90", "APD50", "V_peak", "V_rest")))
    log.info(f"wrote {args.output}" + (f" and {args.json}" if args.json else ""))
    return 0
