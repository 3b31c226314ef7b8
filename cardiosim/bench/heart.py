"""Whole hearts, end to end: the preparation (``cardiosim geometry biv``: anatomy, labels, rule-based fibres), the
run's set-up and its steps, for the built-in BiV and the human-size BiV, each case one geometry command and one
``cardiosim run`` in their own processes, timed by their own clocks (the geometry's wall time and peak memory, the
run's JSON summary).

Every case runs run/human-biv.toml's model: O'Hara-Rudy 2011 (CellML, Rush-Larsen) endo-, mid- and epicardial cells
by the transmural coordinate, both endocardia stimulated at t = 0 (``--purkinje``: a grown Purkinje network
stimulated at its His bundle instead; ``--network-share PAIRS``: PAIRS runs without and with it, alternately, and
the difference per step, the network's share), the 12-lead pseudo-ECG, dt 0.025 ms with 2 ODE substeps; the
built-in BiV with its own 12 electrodes (ecg.twelve_lead = "biv") and no probes. ``--duration`` ms are simulated
(the default 10 ms is a cost measurement, not a beat); the one-beat figure is then preparation + set-up + the steps of
``--beat`` ms at the measured ms per step, and says so ("estimate") unless ``--duration`` reached ``--beat``.

    cardiosim bench heart [--cases biv-0.25 biv-0.125 human-0.25] [--duration 10] [--equations monodomain]
        [--purkinje | --network-share PAIRS] [--placement resident] [--ranks 1] [--spacing CM] [--json FILE]
        [--prepare-only DIR | --prepared DIR] [-- PETSC OPTIONS]

``--prepare-only DIR`` makes the cases' geometries only, into DIR with their figures; ``--prepared DIR`` then
runs them (two jobs, where making the geometry and the run do not fit in one).

``--spacing`` replaces every case's spacing, the case then named for it in mm (``--cases human-0.25 --spacing
0.05`` is human-0.5; a CPU try of the command at a coarse grid: ``--cases biv-0.25 --spacing 0.2 --placement
cpu``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from cardiosim.bench.launch import machine, run_config

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "run" / "human-biv.toml"
# name: (cardiosim geometry biv --size, spacing cm)
CASES = {"biv-0.25": ("idealised", 0.025), "biv-0.125": ("idealised", 0.0125), "human-0.25": ("human", 0.025)}
PHASES = ("reaction", "exchange", "purkinje", "parabolic", "elliptic", "io")
# ``python -c PEAK cardiosim ...``: the command, then its peak resident memory (KiB, its own and its children's) as
# the last line of stderr
PEAK = ("import atexit, resource, runpy, sys\n"
        "atexit.register(lambda: print('PEAK', max(resource.getrusage(w).ru_maxrss for w in "
        "(resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)), file=sys.stderr))\n"
        "sys.argv = sys.argv[1:]\nrunpy.run_module('cardiosim', run_name='__main__')")


def purkinje_sets(spacing: float) -> list[str]:
    """A grown network instead of the endocardial stimulus: run/biv-purkinje.toml's network, its junctions reaching
    the tissue nodes within 2 grid spacings."""
    return ["stimulus=[]", "purkinje.grow=true", "purkinje.spacing=0.02", "purkinje.fibres=1000.0",
            "purkinje.pmj_resistance=1.0", f"purkinje.pmj_radius={2 * spacing:g}",
            "purkinje.tree={segment = 0.04, spacing = 0.12, branch_length = 0.2}"]


def prepare(size: str, spacing: float, out: Path) -> tuple[dict, list[str]]:
    """The geometry of a case: (its figures, the --set overrides that point a run at it)."""
    cmd = ["cardiosim", "geometry", "biv", "--size", size, "--spacing", f"{spacing:g}", "--out", str(out),
           "--overwrite"]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", PEAK, *cmd], capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    lines = proc.stdout[proc.stdout.index("[grid]"):]
    data = tomllib.loads(lines)
    g, t = data["grid"], data["tissue"]
    sets = [f"grid.size={g['size']!r}", f"grid.spacing={g['spacing']!r}", f"grid.origin={g['origin']!r}",
            f'tissue.label_file="{t["label_file"]}"', f'tissue.fibre_file="{t["fibre_file"]}"']
    peak = int(proc.stderr.rsplit("PEAK", 1)[1]) / 2**20
    return {"preparation_s": wall, "preparation_peak_gib": peak, "preparation": " ".join(cmd)}, sets


def geometry(size: str, spacing: float, label: str, folder, reuse: bool) -> tuple[dict, list[str]]:
    """A case's geometry in ``folder`` (``label``.h5) and its figures (``label``.json beside it): made, or with
    ``reuse`` read back as an earlier ``--prepare-only`` left them (a geometry that takes longer than the run's
    machine allows in one go)."""
    h5, figures = Path(folder) / f"{label}.h5", Path(folder) / f"{label}.json"
    if reuse:
        kept = json.loads(figures.read_text())
        return kept["figures"], kept["sets"]
    Path(folder).mkdir(parents=True, exist_ok=True)
    geo, sets = prepare(size, spacing, h5)
    figures.write_text(json.dumps({"figures": geo, "sets": sets}, indent=2) + "\n")
    return geo, sets


def run_case(sets: list[str], ranks: int, placement: str, petsc: list[str], out: Path) -> dict:
    s, _ = run_config(CONFIG, out, ranks, placement, sets, petsc)
    t, steps = s["timing_s"], s["steps"]
    # the run's two snapshots (t = 0 and the end; output.interval = 1e9) are a fixed cost, not a step's: apart
    snap = s["snapshots"]["wall_s"]
    loop = t["total"]["max"] - s["setup_s"] - snap
    tissue = s["layout"].get("tissue_per_rank")
    return {"grid_nodes": s["nodes"], "tissue_nodes": sum(tissue) if tissue else s["nodes"], "steps": steps,
            "simulated_ms": s["simulated_ms"], "dt_ms": s["dt_ms"], "ode_substeps": s["ode_substeps"],
            "equations": s["equations"], "setup_s": s["setup_s"], "setup_phases_s": s["setup_phases_s"],
            "ms_per_step": 1e3 * loop / steps, "loop_s": loop,
            "phases_ms_per_step": {k: 1e3 * (t[k]["max"] - snap * (k == "io")) / steps for k in PHASES if k in t},
            "snapshot_s": snap / max(s["snapshots"]["count"], 1),
            "iterations": {k: v["mean"] for k, v in s["iterations"].items()}, "purkinje": s.get("purkinje")}


def network_share(run, network: list[str], pairs: int) -> dict:
    """What the Purkinje network adds to a step: ``pairs`` runs without and with it (``run(extra_sets)``), one after
    the other, on the same tissue (stimulated at its endocardia without, from the network with: the tissue's cost
    per step does not depend on where it is activated); the last run with it is ``last``."""
    without, with_ = [], []
    for _ in range(pairs):
        without.append(run([])["ms_per_step"])
        last = run(network)
        with_.append(last["ms_per_step"])
    a, b = sum(without) / pairs, sum(with_) / pairs
    return {"pairs": pairs, "without_ms_per_step": without, "with_ms_per_step": with_, "added_ms_per_step": b - a,
            "share": (b - a) / b, "last": last}


def beat(r: dict, beat_ms: float) -> dict:
    """The one-beat figure: measured where the run simulated a whole beat, else preparation + set-up + the beat's
    steps at the measured ms per step + the two snapshots."""
    measured = r["simulated_ms"] >= beat_ms - 1e-9
    steps = round(beat_ms / r["dt_ms"])
    stepping = r["loop_s"] if measured else steps * r["ms_per_step"] / 1e3
    return {"beat_ms": beat_ms, "beat_s": r["preparation_s"] + r["setup_s"] + stepping + 2 * r["snapshot_s"],
            "beat_is": "measured" if measured else f"estimate from {r['simulated_ms']:g} ms"}


def markdown(results: list[dict], meta: dict) -> str:
    lines = ["### Whole hearts", "",
             f"{meta['date']} · {meta['machine']['cpu']} · GPU: {meta['machine']['gpu']} · `{meta['command']}`", "",
             "| case | tissue nodes | preparation (s) | peak (GiB) | set-up (s) | ms/step | reaction | purkinje | "
             "parabolic | elliptic | io | one beat (s) |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        ph = r["phases_ms_per_step"]
        lines.append(f"| {r['case']} | {r['tissue_nodes']:,} | {r['preparation_s']:.1f} | "
                     f"{r['preparation_peak_gib']:.2f} | {r['setup_s']:.1f} | {r['ms_per_step']:.2f} | "
                     + " | ".join(f"{ph.get(k, 0.0):.2f}" for k in ("reaction", "purkinje", "parabolic", "elliptic",
                                                                     "io"))
                     + f" | {r['beat_s']:.0f} ({r['beat_is']}) |")
    for r in results:
        if "network_share" in r:
            n = r["network_share"]
            lines += ["", f"{r['case']}: the network adds {n['added_ms_per_step']:.3f} ms to a step of "
                          f"{sum(n['with_ms_per_step']) / n['pairs']:.3f} ({100 * n['share']:.1f} %; mean of "
                          f"{n['pairs']} runs without and with it, alternately)"]
    return "\n".join(lines + [""])


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    petsc = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="cardiosim bench heart", description=__doc__.split("\n")[0])
    p.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    p.add_argument("--duration", type=float, default=10.0, help="ms simulated per case (default 10)")
    p.add_argument("--beat", type=float, default=1000.0, help="ms of the one-beat figure (default 1000)")
    p.add_argument("--equations", choices=("monodomain", "bidomain"), default="monodomain")
    p.add_argument("--purkinje", action="store_true", help="a grown Purkinje network instead of the endocardial "
                                                           "stimulus")
    p.add_argument("--network-share", type=int, default=0, metavar="PAIRS",
                   help="what the grown network adds to a step: PAIRS runs without and with it, alternately")
    p.add_argument("--placement", default="resident", help="cell.placement (default resident; cpu to try it on a "
                                                           "CPU)")
    p.add_argument("--ranks", type=int, default=1)
    p.add_argument("--spacing", type=float, help="every case's grid spacing instead of its own, cm")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE", help="more overrides")
    p.add_argument("--json", help="write the results here too")
    kept = p.add_mutually_exclusive_group()
    kept.add_argument("--prepare-only", metavar="DIR", help="only each case's geometry, kept in DIR with its figures "
                                                          "(DIR/<case>.h5, DIR/<case>.json), for --prepared")
    kept.add_argument("--prepared", metavar="DIR", help="each case's geometry and its figures from --prepare-only DIR "
                                                      "instead of making it")
    args = p.parse_args(ours)
    plan = []
    for name in args.cases:
        size, spacing = CASES[name]
        spacing = args.spacing or spacing
        plan.append((name, size, spacing, name if spacing == CASES[name][1] else
                     f"{name.split('-')[0]}-{10 * spacing:g}"))                       # named for its spacing in mm
    missing = [f"{label}.h5 and {label}.json" for *_, label in plan if args.prepared and not all(
        (Path(args.prepared) / f"{label}{ext}").is_file() for ext in (".h5", ".json"))]
    if missing:
        print(f"cardiosim: error: --prepared {args.prepared}: has no {', '.join(missing)}; make them with "
              f"cardiosim bench heart --cases ... --prepare-only {args.prepared}", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="cardiosim-heart-") as tmp:
        for name, size, spacing, label in plan:
            geo, sets = geometry(size, spacing, label, args.prepare_only or args.prepared or tmp,
                                 reuse=bool(args.prepared))
            if args.prepare_only:
                results.append({"case": label, "spacing_cm": spacing, **geo})
                print(json.dumps(results[-1]), flush=True)
                continue
            sets += [f"simulation.duration={args.duration:g}", f'simulation.equations="{args.equations}"']
            if size != "human":
                sets += ['ecg.twelve_lead="biv"', "probe=[]"]
            network = purkinje_sets(spacing) if args.purkinje or args.network_share else []
            out = Path(tmp) / f"{name}-run.h5"
            share = None
            if args.network_share:
                share = network_share(lambda extra: run_case(sets + extra + args.set, args.ranks, args.placement,
                                                             petsc, out), network, args.network_share)
            r = {"case": label + " purkinje" * bool(network), "spacing_cm": spacing, **geo,
                 **(share.pop("last") if share else run_case(sets + network + args.set, args.ranks, args.placement,
                                                              petsc, out))}
            if share:
                r["network_share"] = share
            r.update(beat(r, args.beat))
            (Path(tmp) / f"{label}.h5").unlink(missing_ok=True)
            results.append(r)
            print(json.dumps(r), flush=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench heart " + " ".join(shlex.quote(a) for a in argv)}
    if args.json:
        Path(args.json).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    if not args.prepare_only:
        print(markdown(results, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
