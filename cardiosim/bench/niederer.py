"""The Niederer et al. 2011 N-version benchmark (reference/verification.md §3): nine runs of the monodomain slab
(dx 0.5/0.2/0.1 mm × dt 0.05/0.01/0.005 ms, configs in run/niederer/), activation times at P1–P9 and along the
diagonal P1→P8, written to docs/user/niederer.md with the machine, wall times and cell-steps per second.

    cardiosim bench niederer [--runs dx0.5_dt0.05 ...] [--ranks 2] [--write docs/user/niederer.md] [-- PETSc options]

Activation time is the interpolated first upward crossing of 0 mV, recorded during the run
(/maps/activation_time); points are sampled by multilinear interpolation at their coordinates (P9 lies between
nodes at dx 0.2 mm).
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from cardiosim.analysis.maps import sample
from cardiosim.bench.launch import machine, publish
from cardiosim.runtime.mpi import mpirun_command
from cardiosim.bench import niederer_published as pub

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "run" / "niederer"
DX = ("0.5", "0.2", "0.1")                 # mm
DT = ("0.05", "0.01", "0.005")             # ms
RUNS = [f"dx{dx}_dt{dt}" for dx in DX for dt in DT]
POINTS = {                                  # mm
    "P1": (0, 0, 0), "P2": (0, 7, 0), "P3": (20, 0, 0), "P4": (20, 7, 0), "P5": (0, 0, 3),
    "P6": (0, 7, 3), "P7": (20, 0, 3), "P8": (20, 7, 3), "P9": (10, 3.5, 1.5),
}
DIAGONAL_SAMPLES = 41


def run_one(name: str, ranks: int, out_dir: Path, petsc_args=(), overrides=()) -> dict:
    """Run one configuration under mpirun; return its activation times, diagonal and cost."""
    import h5py
    out = out_dir / f"{name}.h5"
    sets = [a for o in overrides for a in ("--set", o)]
    cmd = mpirun_command(ranks) + [sys.executable, "-m", "cardiosim", "run", str(CONFIGS / f"{name}.toml"),
                                   "--output", str(out), "--overwrite", "--quiet", *sets, "--", *petsc_args]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed ({proc.returncode}):\n{proc.stdout.strip()[-2000:]}\n"
                           f"{proc.stderr.strip()[-2000:]}")
    summary = json.loads(out.with_suffix(".json").read_text())
    with h5py.File(out) as f:
        amap = f["maps/activation_time"][:]
        h = f["grid"].attrs["spacing"]
    points = {p: sample(amap, h, [c / 10 for c in xyz]) for p, xyz in POINTS.items()}
    s = np.linspace(0.0, 1.0, DIAGONAL_SAMPLES)
    p1, p8 = np.array(POINTS["P1"]) / 10, np.array(POINTS["P8"]) / 10
    diagonal = [sample(amap, h, p1 + si * (p8 - p1)) for si in s]
    cells, steps, k = summary["nodes"], summary["steps"], summary["ode_substeps"]
    reaction = summary["timing_s"]["reaction"]["max"]
    return {"run": name, "dx_mm": float(name[2:name.index("_")]), "dt_ms": float(name.split("_dt")[1]),
            "points": points, "diagonal": diagonal, "diagonal_mm": list(s * float(np.linalg.norm(p8 - p1)) * 10),
            "ranks": ranks, "nodes": cells, "wall_s": wall, "run_s": summary["wall_s"],
            "where": f"{machine()['host']}: {ranks} rank(s), cells {summary['layout']['ode_backend']}, "
                     f"{'PETSc ' + ' '.join(petsc_args) if petsc_args else 'PETSc CPU'}",
            "cell_steps_per_s": cells * steps * k / reaction if reaction > 0 else None,
            "not_activated": int(np.isnan(amap).sum())}


def convergence_lines(results: list[dict]) -> list[str]:
    """Plain statements: spread over dt at each dx, and the change with dx at each dt, at P8 and over all points."""
    by = {(r["dx_mm"], r["dt_ms"]): r for r in results}
    lines = []
    for dx in sorted({r["dx_mm"] for r in results}, reverse=True):
        rs = [by[(dx, float(dt))] for dt in DT if (dx, float(dt)) in by]
        if len(rs) > 1:
            p8 = [r["points"]["P8"] for r in rs]
            spread = max(max(r["points"][p] for r in rs) - min(r["points"][p] for r in rs) for p in POINTS)
            times = ", ".join(f"{v:.2f}" for v in p8)
            steps = ", ".join(f"{r['dt_ms']:g}" for r in rs)
            lines.append(f"- dx = {dx} mm: P8 activates at {times} ms for dt = {steps} ms; largest spread over dt "
                         f"at any point {spread:.2f} ms.")
    for dt in DT:
        rs = [by[(float(dx), float(dt))] for dx in DX if (float(dx), float(dt)) in by]
        if len(rs) > 1:
            times = ", ".join(f"{r['points']['P8']:.2f}" for r in rs)
            sizes = ", ".join(f"{r['dx_mm']:g}" for r in rs)
            lines.append(f"- dt = {dt} ms: P8 activates at {times} ms for dx = {sizes} mm.")
    return lines


def plot(results: list[dict], path: Path) -> bool:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    styles = {"0.05": ":", "0.01": "--", "0.005": "-"}
    colours = {0.5: "tab:red", 0.2: "tab:blue", 0.1: "tab:green"}
    for r in results:
        ax.plot(r["diagonal_mm"], r["diagonal"], styles[f"{r['dt_ms']:g}"], color=colours.get(r["dx_mm"], "k"),
                label=f"dx {r['dx_mm']:g} mm, dt {r['dt_ms']:g} ms")
    ax.set_xlabel("distance along the diagonal P1→P8 (mm)")
    ax.set_ylabel("activation time (ms)")
    ax.set_title("Niederer 2011 slab, cardiosim")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def published_lines(results: list[dict]) -> list[str]:
    """Our dt = 0.01 ms runs beside the eleven codes' mean ± SD (cardiosim/bench/niederer_published.py)."""
    lines = ["Against the eleven codes of the paper (mean ± SD at dt = 0.01 ms; source and caveat in "
             "cardiosim/bench/niederer_published.py), our dt = 0.01 ms runs:", "",
             "| dx (mm) | point (position, mm) | cardiosim | 11 codes | (ours − mean)/SD |", "|---|---|---|---|---|"]
    for r in (r for r in results if r["dt_ms"] == 0.01):
        for label, pos, ours, mean, sd in pub.compare(r["points"], POINTS, r["dx_mm"]):
            lines.append(f"| {r['dx_mm']:g} | {label} {tuple(pos)} | {ours:.2f} | {mean:.2f} ± {sd:.2f} | "
                         f"{(ours - mean) / sd:+.2f} |")
    others = "; ".join(f"{name}: " + ", ".join(f"dx {dx} mm {v}" for dx, v in p8.items())
                       for name, _, p8 in pub.OTHER_CODES_P8)
    return lines + ["", f"P8 of later codes, from their repositories: {others} ms.", ""]


def markdown(results: list[dict], meta: dict, png: str | None) -> str:
    pts = list(POINTS)
    lines = ["## Niederer et al. 2011 slab: cardiosim results", "",
             f"{meta['date']} · {meta['machine']['cpu']} ({meta['machine']['cores']} cores) · GPU: "
             f"{meta['machine']['gpu']} · `{meta['command']}`", "",
             "Activation times (ms): interpolated first upward crossing of 0 mV, sampled at the points' coordinates.",
             "", "| run | " + " | ".join(pts) + " | wall (s) | cell-steps/s (reaction) | where |",
             "|---|" + "---|" * (len(pts) + 3)]
    for r in results:
        cs = f"{r['cell_steps_per_s']:.3g}" if r["cell_steps_per_s"] else "—"
        lines.append(f"| dx {r['dx_mm']:g} mm, dt {r['dt_ms']:g} ms | "
                     + " | ".join(f"{r['points'][p]:.2f}" for p in pts)
                     + f" | {r['wall_s']:.0f} | {cs} | {r.get('where', str(r['ranks']) + ' rank(s)')} |")
    lines += ["", "Convergence:", *convergence_lines(results), ""]
    lines += published_lines(results)
    if png:
        lines += [f"![activation along the diagonal]({png})", ""]
    lines += ["Activation along the diagonal P1→P8 (ms), at 0, 25, 50, 75 and 100 % of its length:", "",
              "| run | 0 % | 25 % | 50 % | 75 % | 100 % |", "|---|---|---|---|---|---|"]
    q = [round(i * (DIAGONAL_SAMPLES - 1) / 4) for i in range(5)]
    for r in results:
        lines.append(f"| dx {r['dx_mm']:g}, dt {r['dt_ms']:g} | "
                     + " | ".join(f"{r['diagonal'][i]:.2f}" for i in q) + " |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    petsc_args = argv[argv.index("--") + 1:] if "--" in argv else []
    ours = argv[:argv.index("--")] if "--" in argv else argv
    p = argparse.ArgumentParser(prog="cardiosim bench niederer", description=__doc__.split("\n")[0])
    p.add_argument("--runs", nargs="+", default=RUNS, choices=RUNS, metavar="RUN",
                   help=f"which runs (default all nine: {' '.join(RUNS)})")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--out-dir", default="out/niederer", help="where the runs' HDF5 files go")
    p.add_argument("--write", help="markdown page to update (docs/user/niederer.md)")
    p.add_argument("--json", help="write the results as JSON too")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                   help="config override passed to every run (e.g. cell.backend=\"cuda\")")
    args = p.parse_args(ours)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    meta = {"date": datetime.date.today().isoformat(), "machine": machine(),
            "command": "cardiosim bench niederer " + " ".join(argv)}
    results = []
    for name in args.runs:
        r = run_one(name, args.ranks, out_dir, petsc_args, args.set)
        results.append(r)
        print(f"{name}: " + " ".join(f"{k} {v:.2f}" for k, v in r["points"].items())
              + f" | {r['wall_s']:.0f} s", flush=True)
    png = None
    if args.write:
        png_path = Path(args.write).with_name("niederer_diagonal.png")
        png = png_path.name if plot(results, png_path) else None
    publish(markdown(results, meta, png), meta, results, args.json, args.write,
            "niederer:" + meta["machine"]["host"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
