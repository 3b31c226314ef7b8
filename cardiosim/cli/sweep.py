"""``cardiosim sweep CONFIG --vary KEY=v1,v2 ...``: many runs of one config and one table of chosen outputs; its
options here, the sweep itself in cardiosim.simulation.sweep (:func:`~cardiosim.simulation.sweep.command`). Its
process imports neither MPI nor PETSc: the runs are children (``cardiosim run``, under mpirun with ``--np``), and a
nested mpirun fails inside an MPI singleton's environment."""

from __future__ import annotations

import argparse

from cardiosim.cli import common

START = common.RAW
STOP_SIGNALS = True     # a stop is passed on to the runs: checkpoints, exit status 75 (cardiosim.simulation.sweep)


def add_parser(sub) -> None:
    sub.add_parser("sweep", help="many runs of one config (--vary KEY=v1,v2 ...), locally in parallel or as a SLURM "
                                 "job array, and one table of chosen outputs (see cardiosim sweep --help)",
                   add_help=False)


def parser() -> argparse.ArgumentParser:
    from cardiosim.simulation.sweep import DEFAULT_COLLECT, MAX_RUNS, QUANTITIES   # lazy: as in main
    p = common.Parser(prog="cardiosim sweep", description="Many runs of one config (the product of the --vary "
                      "values, or --zip), locally in parallel or as a SLURM job array, and one table of chosen "
                      "outputs.",
                      epilog="Quantities for --collect: " + "; ".join(f"{k}: {v}" for k, v in QUANTITIES.items()))
    p.add_argument("config", help="TOML config file")
    p.add_argument("--vary", action="append", default=[], metavar="KEY=v1,v2,...",
                   help="a config key (as for --set: stimulus.S2.start, grid.spacing, ...) and its values, "
                        "comma-separated TOML, or a:b:step (inclusive); repeatable")
    p.add_argument("--zip", action="store_true", help="the i-th values of every --vary together (a list of runs), "
                                                      "instead of their product")
    p.add_argument("--link", action="append", default=[], metavar="KEY=EXPRESSION",
                   help="a key computed in every run from the varied ones: numbers, + - * /, parentheses and "
                        "--vary keys (simulation.duration=10*stimulus.S1.period); repeatable, each may use the "
                        "links before it; a column of the table")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="a fixed override for every run")
    p.add_argument("--out", required=True, help="folder of the runs' outputs (run-NNN.h5) and the table")
    p.add_argument("--collect", nargs="+", default=list(DEFAULT_COLLECT), metavar="QUANTITY",
                   help=f"what the table holds (default: {' '.join(DEFAULT_COLLECT)})")
    p.add_argument("--table", help="the table: .csv or .h5 (default OUT/sweep.csv)")
    p.add_argument("--plot", nargs="+", default=[], metavar="QUANTITY",
                   help="draw each of these collected quantities against --against, a PNG beside the table named "
                        "after it (OUT/sweep_QUANTITY_vs_KEY.png by default); replaced where the table is")
    p.add_argument("--against", metavar="KEY",
                   help="the x axis of --plot: a varied (or linked) key, the other varied keys a line each; or a "
                        "collected quantity (probe.NAME.di.2: a restitution curve), the first --vary tracing each "
                        "curve")
    p.add_argument("--jobs", type=int, default=1, help="runs at a time (default 1)")
    p.add_argument("--max-runs", type=int, default=MAX_RUNS, metavar="N",
                   help=f"refuse a plan of more runs than N, before anything runs (default {MAX_RUNS}: a plan of "
                        f"more is most likely a mistake in a:b:step)")
    p.add_argument("--np", type=int, default=1, help="MPI ranks per run (default 1)")
    p.add_argument("--slurm", action="store_true", help="write OUT/sweep.sbatch (a job array) instead of running")
    p.add_argument("--collect-only", action="store_true", help="only (re)write the table from OUT's runs")
    p.add_argument("--overwrite", action="store_true", help="replace earlier runs' files and the table")
    p.add_argument("--quiet", action="store_true", help="no line per run")
    return p


def main(words) -> int:
    from cardiosim.simulation import sweep   # lazy: NumPy and h5py, after the stop-signal handler (STOP_SIGNALS)
    if words[:1] == ["--check"]:     # the configs' check, in a child (cardiosim.simulation.sweep.check_configs)
        return sweep.check_child(words[1])
    return common.guarded(lambda: sweep.command(parser().parse_args(words), words), comm=None)
