"""How benchmarks start their runs, describe the machine they ran on, and publish what they measured."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from cardiosim.runtime.gpu import query_gpus
from cardiosim.runtime.mpi import mpirun_command


def machine() -> dict:
    """Host, CPU model, core count and GPU names, for the header of a benchmark table."""
    info = {"host": platform.node(), "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                info["cpu"] = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpus, _ = query_gpus("name", timeout=20)
    info["gpu"] = ", ".join(name for name, in gpus) if gpus else "none"
    return info


def write_section(page: Path, key: str, text: str) -> None:
    """Replace (or append) the section between markers for ``key`` in the benchmarks page."""
    begin, end = f"<!-- bench:{key}:begin -->", f"<!-- bench:{key}:end -->"
    body = page.read_text() if page.exists() else "# Benchmarks\n\nMeasured, never asserted: each table says " \
        "where, when and with which command it was made. Re-running a benchmark replaces its own section.\n\n"
    block = f"{begin}\n{text}\n{end}"
    if begin in body and end in body:
        body = body[:body.index(begin)] + block + body[body.index(end) + len(end):]
    else:
        body = body.rstrip("\n") + "\n\n" + block + "\n"
    page.write_text(body)


def publish(text: str, meta: dict, results: list, json_path=None, page=None, key: str = "") -> None:
    """Print a benchmark's markdown; where asked, also write its results as JSON and the markdown into its own
    section (``key``) of the page."""
    if json_path:
        Path(json_path).write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    if page:
        write_section(Path(page), key, text)
    print(text)


def timed_steps(sim) -> tuple[float, dict, dict]:
    """Run a Simulation to its end with the first step as a warm-up (first solves, page faults, GPU copies) left
    out: (wall seconds of the other steps, the timers' summary over ranks, iterations per solver)."""
    import time
    sim.tissue.solve_phi(sim.V, sim.phi, 0.0)
    sim.step()
    for k in sim.timers.total:
        sim.timers.total[k] = 0.0
    for s in sim.tissue.solvers():
        s.iterations.clear()
    t0 = time.perf_counter()
    while sim.step_index < sim.n_steps:
        sim.step()
    return time.perf_counter() - t0, sim.timers.summary(sim.comm), sim.tissue.iterations()


def petsc_args() -> list[str]:
    """This process's PETSc options: everything after ``--``."""
    argv = sys.argv
    return argv[argv.index("--") + 1:] if "--" in argv else []


def report(sim, result: dict) -> dict:
    """A case's result, printed by rank 0 as the RESULT line :func:`run_single` reads."""
    if sim.comm.rank == 0:
        print("RESULT " + json.dumps(result), flush=True)
    return result


def run_config(cfg: Path, out: Path, ranks: int, placement: str, sets: list[str], petsc: list[str],
               timeout: float | None = None) -> tuple[dict, str]:
    """``cardiosim run CFG`` in its own mpirun of ``ranks``, writing ``out``: cell.placement = ``placement`` (the
    CUDA cells with resident), no snapshot between t = 0 and the end, the ``--set`` overrides ``sets`` and the
    PETSc options ``petsc``. Returns the run's JSON summary and its stdout; RuntimeError with both outputs' tails
    where it fails."""
    cmd = (mpirun_command(ranks)
           + [sys.executable, "-m", "cardiosim", "run", str(cfg), "--quiet", "--overwrite", "--output", str(out),
              "--set", f'cell.placement="{placement}"', "--set", "output.interval=1e9"]
           + (["--set", 'cell.backend="cuda"'] if placement == "resident" else [])
           + [a for s in sets for a in ("--set", s)] + (["--", *petsc] if petsc else []))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                          env=dict(os.environ, PYTHONUNBUFFERED="1"))
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return json.loads(Path(out).with_suffix(".json").read_text()), proc.stdout


def run_single(cmd: list[str]) -> dict:
    """Run one benchmark case (its own mpirun) and return the result its rank 0 printed."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=3600)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
