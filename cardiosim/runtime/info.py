"""What this installation can do, and the checks that follow from it.

- ``cardiosim info``: one line per part (PETSc and its CUDA, petsc4py, PyCUDA, the GPUs seen, nvcc, mpi4py's MPI and
  whether it is CUDA-aware, the ``mpirun`` on PATH against mpi4py's MPI, the ranks the launcher started against the
  ranks MPI sees) and a verdict; exit status 0 where the parts fit together, 1 where one does not (a PETSc that does
  not load, an ``mpirun`` of another MPI than mpi4py's, GPUs that this PETSc or a missing PyCUDA cannot use).
- :func:`check_rank_count`: ``cardiosim run`` refuses to start where the launcher started another number of ranks
  than MPI sees (mpi4py linked against another MPI than the launcher's: N single-rank copies of the run would write
  the same files).
- :func:`petsc_has_cuda` reads PETSc's ``petscconf.h``, so the GPU options can be checked and completed before
  PETSc starts (:mod:`cardiosim.runtime.petsc`).

Everything here reads the machine as it is; nothing is installed or changed (that is ``make setup``'s:
tools/bootstrap.sh).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from cardiosim.runtime.errors import UserError
from cardiosim.runtime.gpu import query_gpus
from cardiosim import __version__

# The variables a launcher gives each rank with the number of ranks it started, most specific first: Open MPI's
# mpirun, then a PMI (MPICH's Hydra, srun --mpi=pmi2), then srun's step. SLURM_NTASKS alone is the job's count, also
# set in the batch script itself (where one may well start fewer ranks with mpirun -n), so it counts only inside an
# srun step (SLURM_STEP_ID set).
_LAUNCHER_VARIABLES = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS")

_FIX_MPI = ("mpi4py and the launcher must use one MPI: load the cluster's MPI module (an mpicc on PATH) before "
            "`make setup` in a fresh venv, or launch with this venv's mpirun; `cardiosim info` shows both")


def launcher_ranks(env=None) -> tuple[int, str] | None:
    """(ranks the launcher started, the variable that says so), or None where no launcher says (a plain start)."""
    env = os.environ if env is None else env
    names = list(_LAUNCHER_VARIABLES)
    if "SLURM_STEP_ID" in env or "SLURM_STEPID" in env:
        names.append("SLURM_NTASKS")
    for name in names:
        value = env.get(name, "").strip()
        if value.isdigit() and int(value) > 0:
            return int(value), name
    return None


def check_rank_count(size: int, env=None) -> None:
    """UserError where the launcher started another number of ranks than MPI sees (``size``). Run by every rank
    before any file or lock: each of N single-rank copies sees the mismatch alone, so none waits for another."""
    started = launcher_ranks(env)
    if started is None or started[0] == size:
        return
    n, name = started
    raise UserError(f"cardiosim run: the launcher started {n} ranks ({name}={n}) but MPI sees {size} "
                    f"(mpi4py's MPI is {mpi_library()}); {_FIX_MPI}")


# --- PETSc ---------------------------------------------------------------------------------------------------------

def petsc_home() -> Path | None:
    """PETSC_DIR/PETSC_ARCH of the PETSc this Python's petsc4py loads, found without starting PETSc; None if
    there is no petsc4py.

    PETSc from PyPI (what make setup builds) is the ``petsc`` package beside petsc4py, which petsc4py's library
    finds relative to itself. petsc4py's own record (``get_config``) names the folder of the venv that built its
    wheel, which is another venv where the wheel came from a cache: it is used only where there is no ``petsc``
    package (a cluster's PETSc, PETSC_DIR/PETSC_ARCH at set-up)."""
    import importlib.util
    try:
        spec = importlib.util.find_spec("petsc")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        return Path(list(spec.submodule_search_locations)[0])
    try:
        import petsc4py
        cfg = petsc4py.get_config()
    except Exception:                 # no petsc4py, or one whose configuration is gone
        return None
    return Path(cfg.get("PETSC_DIR", "")) / cfg.get("PETSC_ARCH", "")


def petsc_conf() -> Path | None:
    """PETSc's petscconf.h for the petsc4py this Python imports (:func:`petsc_home`); None if absent."""
    home = petsc_home()
    if home is None:
        return None
    for path in (home / "include" / "petscconf.h", home.parent / "include" / "petscconf.h"):
        if path.is_file():
            return path
    return None


def petsc_has_cuda() -> bool:
    """Whether this PETSc was configured with CUDA (PETSC_HAVE_CUDA in petscconf.h); no PETSc start, no GPU."""
    conf = petsc_conf()
    return bool(conf) and re.search(r"^#define PETSC_HAVE_CUDA 1", conf.read_text(), re.M) is not None


# --- MPI -----------------------------------------------------------------------------------------------------------

def mpi_library() -> str:
    """mpi4py's MPI in a few words, e.g. 'Open MPI 4.1.6' or 'MPICH 5.0.2'."""
    from mpi4py import MPI
    return _mpi_words(MPI.Get_library_version())


def _mpi_words(text: str) -> str:
    for pattern, name in ((r"Open MPI v?([\d.]+)", "Open MPI"), (r"MPICH Version:\s*([\d.]+\w*)", "MPICH"),
                          (r"Intel\(R\) MPI Library ([\d.]+)", "Intel MPI"), (r"MVAPICH2? Version\s*:?\s*([\d.]+)",
                                                                              "MVAPICH"),
                          (r"CRAY MPICH version ([\d.]+)", "Cray MPICH")):
        found = re.search(pattern, text)
        if found:
            return f"{name} {found.group(1).rstrip('.')}"
    first = text.strip().splitlines()[0] if text.strip() else "unknown"
    return first[:60]


def launcher_mpi(mpirun: str) -> str | None:
    """The MPI of an mpirun/mpiexec, in mpi_library's words, from its --version; None if it does not say."""
    try:
        proc = subprocess.run([mpirun, "--version"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout + proc.stderr
    found = re.search(r"\(Open(RTE| MPI)\) ([\d.]+)", text)
    if found:
        return f"Open MPI {found.group(2)}"
    found = re.search(r"HYDRA build details:\s*\n\s*Version:\s*([\d.]+\w*)", text)
    if found:
        return f"MPICH {found.group(1)}"
    found = re.search(r"Intel\(R\) MPI Library.*?Version ([\d.]+)", text)
    if found:
        return f"Intel MPI {found.group(1)}"
    return None


def mpi_cuda_aware() -> bool | None:
    """Whether mpi4py's MPI passes device memory itself: Open MPI's MPIX_Query_cuda_support, MPICH's
    MPIX_GPU_query_support; None where the library has neither (unknown). MPI must be initialised."""
    import ctypes
    lib = _loaded_libmpi()
    if lib is None:
        return None
    try:
        handle = ctypes.CDLL(lib)
    except OSError:
        return None
    if hasattr(handle, "MPIX_Query_cuda_support"):
        return bool(handle.MPIX_Query_cuda_support())
    if hasattr(handle, "MPIX_GPU_query_support"):
        supported = ctypes.c_int(0)
        if handle.MPIX_GPU_query_support(ctypes.c_int(0), ctypes.byref(supported)) == 0:   # 0: MPIX_GPU_SUPPORT_CUDA
            return bool(supported.value)
    return None


def _loaded_libmpi() -> str | None:
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    found = re.search(r"(/\S*/lib(mpi|mpich)\.so[.\d]*)$", maps, re.M)
    return found.group(1) if found else None


def gpu_aware_mpi_options(given=()) -> list[str]:
    """``-use_gpu_aware_mpi 0`` for petsc4py.init where PETSc has CUDA and MPI is not known to be CUDA-aware
    (:func:`mpi_cuda_aware`; unknown where MPI is not loaded yet). PETSc assumes an aware MPI and, where it is not,
    aborts at its first GPU object ("your MPI is not GPU-aware"); told so, it stages its GPU messages through host
    memory, which is always correct. Empty where the user set it (``given`` or PETSC_OPTIONS: theirs wins)."""
    theirs = [*given, *os.environ.get("PETSC_OPTIONS", "").split()]
    if any(str(a).lstrip("-") in ("use_gpu_aware_mpi", "sf_use_gpu_aware_mpi") for a in theirs):
        return []
    return ["-use_gpu_aware_mpi", "0"] if petsc_has_cuda() and not mpi_cuda_aware() else []


def export_gpu_aware_mpi_option() -> None:
    """:func:`gpu_aware_mpi_options` into PETSC_OPTIONS, for the processes that start PETSc themselves (the tests,
    the benchmarks and their children), where MPI is not loaded yet: "not known to be aware"."""
    extra = gpu_aware_mpi_options()
    if extra:
        os.environ["PETSC_OPTIONS"] = " ".join([os.environ.get("PETSC_OPTIONS", ""), *extra]).strip()


# --- GPUs ----------------------------------------------------------------------------------------------------------

def gpus_seen() -> tuple[list[str], str]:
    """(one 'NAME (sm_XY)' per GPU nvidia-smi lists, why none), without initialising CUDA."""
    rows, why = query_gpus("name,compute_cap")
    if why:
        return [], why
    gpus = [f"{name} (sm_{cap.replace('.', '')})" for name, cap in rows]
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    entries = [v.strip() for v in (visible or "").split(",") if v.strip()]
    if visible is not None and all(e.isdigit() for e in entries):    # by index (UUIDs: left as nvidia-smi lists)
        gpus = [g for i, g in enumerate(gpus) if str(i) in entries]
        if not gpus:
            return [], f"CUDA_VISIBLE_DEVICES={visible!r} hides them"
    return gpus, "" if gpus else "nvidia-smi lists none"


def nvcc_version() -> str | None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        return None
    try:
        out = subprocess.run([nvcc, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = re.search(r"release ([\d.]+)", out)
    return f"{found.group(1) if found else '?'} at {os.path.realpath(nvcc)}"


# --- cardiosim info ------------------------------------------------------------------------------------------------

def report(comm) -> tuple[list[tuple[str, str]], list[str]]:
    """The lines of ``cardiosim info`` as (part, what) pairs, and the problems (empty: exit status 0). ``comm``:
    MPI's world, or None where mpi4py does not load (then said, and MPI's lines are what can be known without it)."""
    lines, problems = [], []
    lines.append(("cardiosim", f"{__version__} at {Path(__file__).resolve().parents[1]}"))
    lines.append(("python", f"{sys.version.split()[0]} at {sys.executable}"))

    cuda_petsc = False
    try:
        import petsc4py
        petsc4py.init(["cardiosim", *gpu_aware_mpi_options()])
        from petsc4py import PETSc
        version = ".".join(map(str, PETSc.Sys.getVersion()))
        cuda_petsc = PETSc.Sys.hasExternalPackage("cuda")
        where = str(petsc_home()).rstrip("/")
        lines.append(("PETSc", f"{version} at {where}, " + ("with CUDA" if cuda_petsc else "without CUDA (CPU only)")))
        lines.append(("petsc4py", petsc4py.__version__))
    except Exception as e:    # noqa: BLE001 - a broken PETSc is what this command is for
        lines.append(("PETSc", f"does not load: {str(e).splitlines()[0] if str(e) else type(e).__name__}"))
        problems.append("PETSc does not load (make setup again, or check PETSC_DIR/PETSC_ARCH)")

    try:
        import pycuda
        pycuda_line = f"{pycuda.VERSION_TEXT}" if hasattr(pycuda, "VERSION_TEXT") else "installed"
        has_pycuda = True
    except ImportError:
        pycuda_line, has_pycuda = "not installed", False
    lines.append(("PyCUDA", pycuda_line))

    gpus, why = gpus_seen()
    lines.append(("GPUs", f"{len(gpus)}: {', '.join(gpus)}" if gpus else f"none ({why})"))
    nvcc = nvcc_version()
    lines.append(("nvcc", nvcc or "not on PATH"))
    if gpus and not (cuda_petsc and has_pycuda):
        lacking = [w for w, ok in (("a PETSc with CUDA", cuda_petsc), ("PyCUDA", has_pycuda)) if not ok]
        problems.append(f"{len(gpus)} GPU(s) seen but no {' and no '.join(lacking)}: the GPU placements cannot run; "
                        f"CARDIOSIM_GPU=1 make setup (a fresh venv) builds both")

    if comm is None:
        import importlib.metadata
        try:
            version = importlib.metadata.version("mpi4py")
        except importlib.metadata.PackageNotFoundError:
            version = "not installed"
        lines.append(("MPI", f"mpi4py {version} does not load its MPI (see the problem below)"))
        problems.append("mpi4py does not load its MPI library: load the MPI it was built with (module load), or "
                        "make setup in a fresh venv with the MPI you use loaded")
        return lines, problems
    library = mpi_library()
    import mpi4py
    aware = mpi_cuda_aware()
    awareness = {True: "CUDA-aware", False: "not CUDA-aware",
                 None: "CUDA-awareness unknown"}[aware]
    staged = " (PETSc told -use_gpu_aware_mpi 0: GPU messages go through host memory)" \
        if cuda_petsc and not aware else ""
    lines.append(("MPI", f"{library} (mpi4py {mpi4py.__version__}), {awareness}{staged}"))

    launcher = shutil.which("mpirun") or shutil.which("mpiexec")
    beside = Path(sys.executable).parent / "mpirun"
    if launcher is None and beside.is_file():
        launcher = str(beside)        # the venv's own (PyPI's MPICH), where the venv is not on PATH
    if launcher is None:
        lines.append(("mpirun", "none on PATH (srun starts the ranks, or put the venv's bin/ on PATH)"))
    else:
        theirs = launcher_mpi(launcher)
        same = theirs == library
        lines.append(("mpirun", f"{launcher}: {theirs or 'an MPI it does not name'}, "
                                + ("the same MPI as mpi4py's" if same else "NOT mpi4py's MPI")))
        if theirs is not None and not same:
            problems.append(f"the mpirun on PATH ({launcher}, {theirs}) is not mpi4py's MPI ({library}); "
                            f"{_FIX_MPI}")

    started = launcher_ranks()
    if started is None:
        lines.append(("ranks", f"{comm.size} (no launcher variable set)"))
    else:
        lines.append(("ranks", f"{comm.size}; the launcher started {started[0]} ({started[1]})"))
        if started[0] != comm.size:
            problems.append(f"the launcher started {started[0]} ranks but MPI sees {comm.size}; {_FIX_MPI}")
    return lines, problems


def main(args=None, petsc_args=()) -> int:
    """``cardiosim info``: the report on rank 0; exit status 1 where :func:`report` found a problem."""
    if petsc_args:
        raise UserError(f"cardiosim info: takes no PETSc options (given after --: {' '.join(petsc_args)})")
    try:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    except Exception as e:   # noqa: BLE001 - mpi4py without its MPI library: what this command is there to say
        comm, why = None, str(e).strip().splitlines()
        print(f"cardiosim info: mpi4py does not load: {' / '.join(why[:2])}", file=sys.stderr)
    lines, problems = report(comm)
    if comm is None or comm.rank == 0:
        width = max(len(part) for part, _ in lines)
        for part, what in lines:
            print(f"{part:<{width}}  {what}")
        if problems:
            for p in problems:
                print(f"{'problem':<{width}}  {p}")
        else:
            print(f"{'verdict':<{width}}  ok")
        sys.stdout.flush()
    return 1 if problems else 0
