"""Verification of the microscopic tissue model on one-row strips (docs/user/microscopic.md §Verification): the
homogenisation sweep over myocyte length, the saltatory staircase, and the block threshold by bisection.

    python -m cardiosim.bench.microscopic [--model mitchell-schaeffer|bondarenko] [--checks homog salt block]
    [mpirun -n N] python -m cardiosim.bench.microscopic --checks solvers --solver-grid 625 [-- PETSc options]

Every run is in this process, on one rank (the strips are small). A strip is N volumes of 8 µm in x, one row,
stimulated on its first 96 µm at t = 0 for 2 ms; t_a is the first upward crossing of 0 mV. The conduction velocity
is measured between the same position in two myocytes a whole number of periods apart (≥ 0.5 mm), more than 1 mm
from either end, so that the staircase does not bias it.
"""

from __future__ import annotations

import argparse
import math
import sys

import numpy as np

from cardiosim.bench.table41 import CONFIGS

H_UM = 8.0                 # volume size (µm)

# The cell models' tissue settings: Bondarenko as in reference §5 (k = 100, −50 µA/cm²), Mitchell–Schaeffer for CI
# (cheap; needs a stronger stimulus for the same 96 µm because its membrane is leakier at rest).
# Strips: Bondarenko's as in reference §5 (480 volumes, CV > 1 mm from the ends); Mitchell–Schaeffer's front is
# wider (its CV settles only ~2 mm from the stimulus, and the sealed end speeds it up over the last ~1.5 mm), so
# its strips are longer and measured farther from the ends.
MODELS = {
    "mitchell-schaeffer": {"ode_substeps": 1, "current": -200.0, "variant": "", "n": 1200, "margin_um": 2500.0},
    "bondarenko": {"ode_substeps": 100, "current": -200.0, "variant": "apical", "n": 480, "margin_um": 1000.0,
                   # Near block the stimulated myocyte is almost isolated, and −200 µA/cm² for 2 ms drives it out
                   # of range (Cass < 0 under Forward Euler): the block search stimulates the first 3 myocytes
                   # with the single-cell strength instead, which excites the strip at every G_p.
                   "block_stimulus": {"current": -80.0, "stim_duration": 1.0, "stim_volumes": 36}},
}

TEMPLATE = """
[simulation]
equations = "{equations}"
duration = {duration!r}
dt = {dt!r}
ode_substeps = {k}
time_scheme = "backward-euler"
progress_interval = 0
[grid]
size = [{length!r}]
spacing = 0.0008
[tissue]
model = "{tissue_model}"
sigma_il = {sigma_hom!r}
sigma_it = {sigma_hom!r}
sigma_el = 1e12
sigma_et = 1e12
[tissue.microscopic]
sigma_c = {sigma_c!r}
G_p = {G!r}
cell_length = {n_l}
depth = {depth!r}
junction_treatment = "{treatment}"
[cell]
model = "{model}"
variant = "{variant}"
[[stimulus]]
shape = "box"
lower = [0.0]
upper = [{stim_upper!r}]
duration = {stim_duration!r}
current_density = {current!r}
"""


def strip_config(G=0.5, n_l=12, sigma_c=0.4, n=None, duration=20.0, dt=0.01, model="mitchell-schaeffer",
                 depth=8.0, treatment="direct", equations="monodomain", homogeneous_sigma=None, stimulus=None,
                 substeps=None):
    """The config of a one-row strip; ``homogeneous_sigma`` (mS/cm) makes it cardiosim's homogeneous model
    instead (vertex-centred grid of the same n nodes, σ_e = 1e12 so that σ_m = σ_i)."""
    # lazy: cardiosim.config imports mpi4py (through cardiosim.reaction), which this module does not
    from cardiosim import config
    m = {**MODELS[model], **(stimulus or {})}
    n = n or m["n"]
    hom = homogeneous_sigma is not None
    length = (n - 1 if hom else n) * H_UM * 1e-4
    # the stimulated volumes: the first stim_volumes (cell-centred), or the nodes over the same length
    stim_upper = (m.get("stim_volumes", 12) - (1 if hom else 0)) * H_UM * 1e-4 + 1e-9
    text = TEMPLATE.format(equations=equations, duration=float(duration), dt=float(dt), k=substeps or m["ode_substeps"],
                           length=round(length, 12), tissue_model="homogeneous" if hom else "microscopic",
                           sigma_hom=float(homogeneous_sigma or 1.0), sigma_c=float(sigma_c), G=float(G),
                           n_l=int(n_l), depth=float(depth), treatment=treatment, model=model,
                           variant=m["variant"], stim_upper=stim_upper, current=m["current"],
                           stim_duration=m.get("stim_duration", 2.0))
    return config.loads(text, name="strip")


def activation(cfg) -> np.ndarray:
    """Activation times (ms) of every volume of a one-rank run; NaN: not activated."""
    # lazy: the simulation imports PETSc, which main starts first (petsc4py.init, with the benchmark's options)
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(cfg, write_output=False)
    while sim.step_index < sim.n_steps:
        sim.step()
    return sim.activation.time.copy()


def run_strip(max_duration=400.0, **kw) -> np.ndarray:
    """Activation times of a strip, run until the front has reached the far end or stopped: a front still
    advancing in the last 10 ms of a run is slow, not blocked, so the run is repeated twice as long (up to
    ``max_duration``). The returned array's ``advancing`` attribute says whether the front still moved in the
    last 10 ms of the last run."""
    duration = kw.pop("duration", 20.0)
    while True:
        t = activation(strip_config(duration=duration, **kw))
        done = bool(np.isfinite(t[-1]))
        advancing = bool(np.isfinite(t).any() and np.nanmax(t) > duration - 10.0)
        if done or not advancing or duration >= max_duration:
            out = t.view(_Times)
            out.advancing = advancing and not done
            return out
        duration = min(2 * duration, max_duration)


class _Times(np.ndarray):
    advancing = False


def measure_points(n_l: int, n: int, margin_um: float = 1000.0) -> tuple[int, int]:
    """Two volumes at the same position in their myocytes, ≥ 0.5 mm apart, more than ``margin_um`` from either
    end (a strip too short for that margin: a quarter of its length, for the block search's short strips)."""
    margin = min(int(math.ceil(margin_um / H_UM)) + 1, n // 4)
    span = int(math.ceil(500.0 / H_UM / n_l)) * n_l     # whole periods, ≥ 0.5 mm
    first = int(math.ceil(margin / n_l)) * n_l          # a myocyte's first volume
    last = first + ((n - margin - first) // span) * span
    if last <= first:
        raise ValueError(f"a strip of {n} volumes is too short for myocytes of {n_l}")
    return first, last


def velocity(t: np.ndarray, n_l: int, model: str = "mitchell-schaeffer") -> float:
    """CV (cm/ms = 10 m/s) between measure_points; NaN if either did not activate."""
    a, b = measure_points(n_l, len(t), MODELS[model]["margin_um"])
    return (b - a) * H_UM * 1e-4 / (t[b] - t[a])


def sigma_eff(sigma_c, G, n_l, depth=8.0, treatment="direct") -> float:
    """σ_eff,l (µS/µm) of a row of identical myocytes of n_l volumes: the series resistances of one period."""
    L, h, d = n_l * H_UM, H_UM, depth
    if treatment == "series":
        return L / (L / sigma_c + h * d / G)
    return L / ((L - h) / sigma_c + h * d / G)


def junction_for(sigma, n_l, sigma_c, depth=8.0, treatment="direct") -> float:
    """G (µS) that gives myocytes of n_l volumes the effective conductivity ``sigma`` (µS/µm)."""
    if treatment == "series":
        return depth / (n_l * (1.0 / sigma - 1.0 / sigma_c))
    return depth / (n_l / sigma - (n_l - 1) / sigma_c)


# ------------------------------------------------------------------------------------------------------------------
def homogenisation(lengths=(1, 2, 3, 4, 6, 12), sigma_c=0.4, G=0.5, model="mitchell-schaeffer", depth=8.0,
                   treatment="direct", **kw) -> dict:
    """§5a: CV of strips of myocytes of each length at one σ_eff (that of the default myocyte with G), against
    the homogeneous strip at σ_eff (every face σ_eff·d) and at σ_c."""
    s_eff = sigma_eff(sigma_c, G, 12, depth, treatment)
    n_hom = 12
    t_hom = run_strip(G=s_eff * depth, n_l=n_hom, sigma_c=s_eff, model=model, depth=depth, treatment="direct", **kw)
    t_c = run_strip(G=sigma_c * depth, n_l=n_hom, sigma_c=sigma_c, model=model, depth=depth, treatment="direct",
                    **kw)
    # One pair of measure points for every length: whole periods of each (12 is a multiple of them all).
    a, b = measure_points(12, len(t_hom), MODELS[model]["margin_um"])
    assert all(12 % n_l == 0 for n_l in lengths)
    region = slice(a, b + 1)

    def cv_of(t):
        return (b - a) * H_UM * 1e-4 / (t[b] - t[a])

    cv_hom, cv_c = cv_of(t_hom), cv_of(t_c)
    rows = []
    for n_l in lengths:
        g = junction_for(s_eff, n_l, sigma_c, depth, treatment)
        t = run_strip(G=g, n_l=n_l, sigma_c=sigma_c, model=model, depth=depth, treatment=treatment, **kw)
        cv = cv_of(t)
        rows.append({"n_l": n_l, "G_uS": g, "cv_cm_per_ms": cv, "rel": cv / cv_hom - 1.0,
                     "max_dt_vs_hom_ms": float(np.nanmax(np.abs(t - t_hom)[region]))})
    return {"sigma_eff_uS_per_um": s_eff, "cv_hom": cv_hom, "cv_sigma_c": cv_c,
            "sqrt_ratio": math.sqrt(s_eff / sigma_c), "cv_ratio": cv_hom / cv_c, "rows": rows}


def staircase(t: np.ndarray, n_l: int, model: str = "mitchell-schaeffer") -> dict:
    """§5b on one activation map: mean intracellular (τ_cell, first to last volume of a myocyte) and junction
    delays (τ_j, last volume to the next myocyte's first) over the myocytes between the measure points."""
    a, b = measure_points(n_l, len(t), MODELS[model]["margin_um"])
    starts = np.arange(a, b, n_l)
    tau_cell = np.mean(t[starts + n_l - 1] - t[starts])
    tau_j = np.mean(t[starts + n_l] - t[starts + n_l - 1])
    r = tau_j / (tau_cell / (n_l - 1))
    return {"tau_cell_ms": tau_cell, "tau_j_ms": tau_j, "r_s": r,
            "cv_staircase": n_l * H_UM * 1e-4 / (tau_cell + tau_j), "cv": velocity(t, n_l, model)}


def saltatory(Gs=(0.5, 0.25, 0.1, 0.05), model="mitchell-schaeffer", n_l=12, **kw) -> list[dict]:
    out = []
    for G in Gs:
        t = run_strip(G=G, n_l=n_l, model=model, **kw)
        out.append({"G_uS": G, **staircase(t, n_l, model)})
    return out


def blocked(t: np.ndarray, n_l: int = 12) -> bool:
    """The last 10 myocytes never activate, and the front has stopped (not merely slow)."""
    return bool(np.all(np.isnan(t[-10 * n_l:]))) and not getattr(t, "advancing", False)


def block_threshold(model="mitchell-schaeffer", n_l=12, hi=0.5, rel=0.02, **kw) -> dict:
    """§5c: G* (µS) by bisection to ``rel``: below it the last 10 myocytes never activate. ``hi`` must conduct;
    the bracket is found by halving G from it."""
    kw.setdefault("stimulus", MODELS[model].get("block_stimulus"))
    t = run_strip(G=hi, n_l=n_l, model=model, **kw)
    if blocked(t, n_l):
        raise ValueError(f"G_p = {hi} µS already blocks")
    cv_hi, runs = velocity(t, n_l, model), 1
    lo = hi / 2
    while not blocked(t := run_strip(G=lo, n_l=n_l, model=model, **kw), n_l):
        hi, cv_hi, lo = lo, velocity(t, n_l, model), lo / 2
        runs += 1
    while (hi - lo) > rel * hi:
        mid = 0.5 * (lo + hi)
        t = run_strip(G=mid, n_l=n_l, model=model, **kw)
        runs += 1
        if blocked(t, n_l):
            lo = mid
        else:
            hi, cv_hi = mid, velocity(t, n_l, model)
    return {"G_star_uS": hi, "blocks_at_uS": lo, "cv_above_cm_per_ms": cv_hi, "runs": runs}


PARABOLIC_PCS = {
    "bjacobi+ilu (default)": {},
    "jacobi": {"pc_type": "jacobi"},
    "mg (DMDA, Galerkin)": "mg",
    "gamg": {"pc_type": "gamg"},
}


def solver_study(n=313, equations="bidomain", repeats=3) -> list[dict]:
    """Preconditioners for the microscopic matrices of the Table 4.1 twin (default layout) on an n × n sheet:
    set-up time, CG iterations and time per solve of a front-shaped right-hand side, warm-started as in a run
    (the initial guess is V* itself). Mitchell–Schaeffer cells: only the matrices matter here."""
    # lazy: these import PETSc, which main starts first (petsc4py.init, with the benchmark's options)
    import time as _time
    from petsc4py import PETSc
    from cardiosim import config
    from cardiosim.solvers.linear import ELLIPTIC_DEFAULTS, PARABOLIC_DEFAULTS, LinearSolver, elliptic_pc_defaults
    from cardiosim.simulation.loop import Simulation
    L = round(n * H_UM * 1e-4, 10)
    cfg = config.load(CONFIGS["microscopic"], [f"grid.size=[{L}, {L}]", f'simulation.equations="{equations}"',
                                               'cell.model="mitchell-schaeffer"', 'cell.variant=""',
                                               "simulation.ode_substeps=1"])
    sim = Simulation(cfg, write_output=False)
    tis, grid = sim.tissue, sim.grid
    x = grid.coords()[:, 0]
    V = grid.vec()
    V.getArray()[:] = np.where(x < 0.3 * L, 20.0, -85.0)          # a depolarised block: a front at 0.3 L
    mg = elliptic_pc_defaults(grid)
    mg = {k: v for k, v in mg.items()} if mg.get("pc_type") == "mg" else {"pc_type": "gamg"}
    rows = []
    systems = [("parabolic", tis.parabolic.A, PARABOLIC_DEFAULTS, PARABOLIC_PCS, False)]
    if equations == "bidomain":
        systems.append(("elliptic", tis.elliptic.A, ELLIPTIC_DEFAULTS,
                        {"mg (DMDA, Galerkin; default)": mg, "gamg": {"pc_type": "gamg"}}, True))
    for name, A, base, pcs, singular in systems:
        for label, opts in pcs.items():
            opts = mg if opts == "mg" else opts
            defaults = {**base, **opts}
            if opts.get("pc_type") not in (None, "bjacobi"):
                defaults = {k: v for k, v in defaults.items() if not k.startswith("sub_")}
            t0 = _time.perf_counter()
            s = LinearSolver(f"study{len(rows)}", A, grid=grid, defaults=defaults, nullspace=singular)
            setup = _time.perf_counter() - t0
            b = A.createVecLeft()
            if singular:
                tis.Ki.mult(V, b)
                b.scale(-1.0)
                b.shift(-b.sum() / b.getSize())
            else:
                b.pointwiseMult(tis.M, V)
                b.scale(tis.alpha)
            its, times = [], []
            for _ in range(repeats):
                y = V.copy() if not singular else A.createVecRight()
                t0 = _time.perf_counter()
                s.ksp.solve(b, y)
                times.append(_time.perf_counter() - t0)
                its.append(s.ksp.getIterationNumber())
                y.destroy()
            rows.append({"system": name, "pc": label, "setup_s": setup, "iterations": its[-1],
                         "solve_ms": 1e3 * min(times), "ranks": PETSc.COMM_WORLD.getSize(), "n": n})
            s.destroy()
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="cardiosim bench microscopic", description=__doc__.split("\n")[0])
    p.add_argument("--model", default="mitchell-schaeffer", choices=tuple(MODELS))
    p.add_argument("--checks", nargs="+", default=["homog", "salt", "block"],
                   choices=("homog", "salt", "block", "solvers"))
    p.add_argument("--solver-grid", type=int, default=313, help="solvers: volumes per side (625: Table 4.1)")
    p.add_argument("--equations", default="bidomain", choices=("bidomain", "monodomain"), help="solvers: system")
    p.add_argument("--depth", type=float, default=8.0, help="sheet depth d (µm)")
    p.add_argument("--treatment", default="direct", choices=("direct", "series"))
    p.add_argument("--dt", type=float, default=0.01, help="PDE step (ms)")
    p.add_argument("--substeps", type=int, help="ODE substeps per PDE step (default: the model's; Bondarenko 100)")
    p.add_argument("--block-strip", type=int, default=240, help="block: strip length (volumes)")
    p.add_argument("--max-duration", type=float, default=400.0,
                   help="block: a front still advancing after this many ms counts as conducting")
    argv = list(sys.argv[1:] if argv is None else argv)
    petsc_args = argv[argv.index("--") + 1:] if "--" in argv else []
    a = p.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    import petsc4py
    petsc4py.init([sys.argv[0], *petsc_args])   # e.g. -dm_vec_type cuda -dm_mat_type aijcusparse (solvers)
    from petsc4py import PETSc
    size, rank = PETSc.COMM_WORLD.getSize(), PETSc.COMM_WORLD.getRank()
    if size > 1 and set(a.checks) - {"solvers"}:
        p.error("the strip checks (homog, salt, block) run on one rank; under mpirun use --checks solvers")
    if rank:
        solver_study(a.solver_grid, a.equations)
        return 0
    kw = {"model": a.model, "depth": a.depth, "dt": a.dt, "treatment": a.treatment, "substeps": a.substeps}
    print(f"model {a.model}, depth {a.depth} µm, junctions {a.treatment}, dt {a.dt} ms, "
          f"ODE substeps {a.substeps or MODELS[a.model]['ode_substeps']}, "
          f"strips {MODELS[a.model]['n']} volumes (block: {a.block_strip})")
    if "homog" in a.checks:
        r = homogenisation(**kw)
        print(f"§5a homogenisation: σ_eff = {r['sigma_eff_uS_per_um']:.4f} µS/µm, CV_hom = {r['cv_hom']:.5f} cm/ms, "
              f"CV_hom/CV(σ_c) = {r['cv_ratio']:.4f} vs sqrt(σ_eff/σ_c) = {r['sqrt_ratio']:.4f}")
        print("  n_l   G (µS)   CV (cm/ms)   CV/CV_hom − 1   max |t_a − t_a,hom| (ms)")
        for row in r["rows"]:
            print(f"  {row['n_l']:3d}  {row['G_uS']:7.4f}  {row['cv_cm_per_ms']:10.5f}  {row['rel']:+13.3e}  "
                  f"{row['max_dt_vs_hom_ms']:10.3e}")
    if "salt" in a.checks:
        print("§5b saltatory conduction (n_l = 12):")
        print("  G_p (µS)  τ_cell (ms)  τ_j (ms)   r_s    CV (cm/ms)  n_l·h/(τ_cell+τ_j)")
        for row in saltatory(**kw):
            print(f"  {row['G_uS']:7.3f}  {row['tau_cell_ms']:10.4f}  {row['tau_j_ms']:9.4f}  {row['r_s']:6.2f}  "
                  f"{row['cv']:10.5f}  {row['cv_staircase']:10.5f}")
    if "block" in a.checks:
        r = block_threshold(n=a.block_strip, max_duration=a.max_duration, **kw)
        print(f"§5c block ({a.block_strip} volumes, fronts still moving after {a.max_duration:g} ms count as "
              f"conducting): G* = {r['G_star_uS']:.4g} µS (blocks at {r['blocks_at_uS']:.4g}), "
              f"CV just above = {r['cv_above_cm_per_ms']:.4g} cm/ms, {r['runs']} runs", flush=True)
    if "solvers" in a.checks:
        print(f"preconditioners, {a.solver_grid}² volumes, default layout, {a.equations}, {size} rank(s), "
              f"PETSc options {' '.join(petsc_args) or '(none)'}:")
        print("  system     preconditioner                 set-up (s)  iterations  solve (ms)")
        for r in solver_study(a.solver_grid, a.equations):
            print(f"  {r['system']:<10} {r['pc']:<30} {r['setup_s']:9.3f}  {r['iterations']:10d}  "
                  f"{r['solve_ms']:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
