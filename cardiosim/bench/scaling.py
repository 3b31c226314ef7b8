"""Strong and weak scaling of whole runs over GPUs: one config run with the resident placement on 1, 2, ... ranks
(one per GPU), each in its own mpirun, with the run's own timing (its JSON summary): ms per step without set-up,
the phases, solver iterations, set-up time, and speed-up / efficiency against the first rank count. ``--weak``
stretches the grid along x with the rank count (nodes per GPU constant; the stimulus, a box at x = 0, stays the
same). Options after ``--`` go to PETSc in every run; ``--variant NAME='-opt v ...'`` adds runs with more PETSc
options at every rank count above 1 (e.g. the layouts and halo strategies of cardiosim.solvers), and on one rank
too with ``--variants-on-one`` (options that apply there, e.g. ``-elliptic_smg_coarse_max``).

    cardiosim bench scaling run/slab3d-1e7.toml --ranks 1 2 [--weak] [--set grid.size=...]
        [--variant sweep='-elliptic_smg_halo sweep -parabolic_smg_halo sweep'] [--json FILE]
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import sys
import tempfile
from pathlib import Path

from cardiosim.bench.launch import machine, publish, run_config


def run_once(cfg: Path, ranks: int, sets: list[str], petsc: list[str], workdir: Path, placement: str) -> dict:
    out = workdir / f"r{ranks}_{abs(hash((tuple(sets), tuple(petsc)))) % 10**8}.h5"
    summary, stdout = run_config(cfg, out, ranks, placement, sets, petsc, timeout=3600)
    t = summary["timing_s"]
    steps = summary["steps"]
    loop = t["total"]["max"] - summary["setup_s"]
    header = next((ln for ln in stdout.splitlines() if ln.startswith("cardiosim:")), "")
    return {"ranks": ranks, "nodes": summary["nodes"], "grid": summary["grid"], "steps": steps,
            "ms_per_step": 1e3 * loop / steps, "setup_s": summary["setup_s"],
            "setup_phases_s": summary.get("setup_phases_s", {}),
            "phases_ms_per_step": {k: 1e3 * v["max"] / steps for k, v in t.items()
                                   if k in ("reaction", "parabolic", "elliptic", "exchange")},
            "iterations": {k: v["mean"] for k, v in summary["iterations"].items()},
            "solvers": header.split("; ", 1)[-1] if header else "", "petsc": petsc, "placement": placement}


def stretched(cfg: Path, ranks: int, sets: list[str]) -> list[str]:
    """grid.size with x times ``ranks`` (from the --set given, else the config's)."""
    # lazy: cardiosim.config imports mpi4py; this process starts mpirun and stays without MPI
    from cardiosim import config
    size = list(config.load(cfg, sets).grid.size)
    size[0] = round(size[0] * ranks, 10)
    return [*sets, f"grid.size={size!r}"]


def markdown(label: str, results: list[dict], meta: dict, weak: bool) -> str:
    """The table: "step" is the phases a step consists of (reaction + exchange + parabolic + elliptic, max over
    ranks); "other" the rest of the loop (probes, maps, the output written at its intervals and at the end: in a
    run of a few steps the last snapshot weighs); speed-up or efficiency from "step"."""
    def step(r):
        return sum(r["phases_ms_per_step"].values())
    base = step(results[0])
    lines = [f"### Scaling: {label}", "",
             f"{meta['date']} · {meta['machine']['cpu']} · GPU: {meta['machine']['gpu']} · `{meta['command']}`", "",
             f"{'Weak' if weak else 'Strong'} scaling, {results[0].get('placement', 'resident')} placement, one rank "
             "per GPU; ms per step (max over ranks, set-up excluded): step = reaction + parabolic + elliptic, other = "
             "the rest of the loop (maps, probes, the output); mean iterations per solve; "
             f"{'efficiency' if weak else 'speed-up'} from \"step\" against the first row.", "",
             "| case | GPUs | nodes | step | reaction | parabolic | elliptic | other | iterations | set-up (s) | "
             f"{'efficiency' if weak else 'speed-up'} |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ph = r["phases_ms_per_step"]
        its = ", ".join(f"{k} {v:.1f}" for k, v in r["iterations"].items())
        gain = base / step(r)
        lines.append(f"| {r['case']} | {r['ranks']} | {r['nodes']:,} | {step(r):.1f} | {ph.get('reaction', 0):.1f} | "
                     f"{ph.get('parabolic', 0):.1f} | {ph.get('elliptic', 0):.1f} | "
                     f"{r['ms_per_step'] - step(r):.1f} | {its} | {r['setup_s']:.1f} | "
                     + (f"{100 * gain:.0f} % |" if weak else f"{gain:.2f}× |"))
    return "\n".join(lines + [""])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    petsc = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="cardiosim bench scaling", description=__doc__.split("\n")[0])
    p.add_argument("config", type=Path)
    p.add_argument("--ranks", type=int, nargs="+", default=[1, 2])
    p.add_argument("--weak", action="store_true", help="grow the grid along x with the ranks")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--variant", action="append", default=[], metavar="NAME='PETSC OPTIONS'")
    p.add_argument("--variants-on-one", action="store_true", help="run the variants on one rank too")
    p.add_argument("--placement", default="resident", help="cell.placement (cpu: to try the benchmark on a CPU)")
    p.add_argument("--label", default="")
    p.add_argument("--write", help="markdown page to update (the table replaces its own section)")
    p.add_argument("--json", help="write the results here too")
    p.add_argument("--render", metavar="JSON", help="no runs: the table of an earlier --json (its own command, date and "
                   "machine), e.g. with other rows first (--first CASE:RANKS) or into --write")
    p.add_argument("--first", metavar="JSON", help="with --render: the rows of another results file first (the "
                   "1-GPU baseline measured in the same job, for a weak-scaling run of more GPUs only)")
    args = p.parse_args(ours)
    if args.render:
        d = json.loads(Path(args.render).read_text())
        first = json.loads(Path(args.first).read_text())["results"][:1] if args.first else []
        label = args.label or f"{args.config.name}, {'weak' if args.weak else 'strong'}"
        publish(markdown(label, first + d["results"], d["meta"], args.weak), d["meta"], d["results"], None,
                args.write, key=f"scaling-{args.config.stem}-{args.label or ('weak' if args.weak else 'strong')}")
        return 0
    variants = [("default", [])] + [(v.split("=", 1)[0], shlex.split(v.split("=", 1)[1])) for v in args.variant]
    results = []
    with tempfile.TemporaryDirectory(prefix="cardiosim-scaling-") as tmp:
        for ranks in args.ranks:
            sets = stretched(args.config, ranks, args.set) if args.weak else list(args.set)
            for name, extra in (variants if ranks > 1 or args.variants_on_one else variants[:1]):
                r = run_once(args.config, ranks, sets, [*petsc, *extra], Path(tmp), args.placement)
                r["case"] = name
                results.append(r)
                print(json.dumps(r), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench scaling " + " ".join(shlex.quote(a) for a in argv)}
    label = args.label or f"{args.config.name}, {'weak' if args.weak else 'strong'}"
    publish(markdown(label, results, meta, args.weak), meta, results, args.json, args.write,
            key=f"scaling-{args.config.stem}-{args.label or ('weak' if args.weak else 'strong')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
