"""The files a command reads and the files it writes, checked against each other before anything is written.

Every command that writes (run, cell, geometry, plot, kernels) names what it reads and what it writes, and
:func:`check_writes` refuses in one line, before any work is done:

- an output that is also an input (a label file, a mesh, a CellML model, the config: it would be destroyed), or
  that is also another output of the same command;
- an output whose name is too long for the file system, that is a directory, or whose folder cannot be written;
- an output that exists, unless ``--overwrite`` is given — and even then only if the existing file is one that
  cardiosim wrote, of the same kind, recognised by its content (:data:`KINDS`): ``--overwrite`` replaces an earlier
  result, never an arbitrary file that happens to carry the name (a config named ``out.json``, a geometry file).

:func:`check_input` is the one way an input file is refused: missing, a directory, unreadable, or a name too long
— each said as what it is.

No MPI, no PETSc, no h5py at import: geometry, plot and inspect run without them.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from cardiosim.runtime.errors import SimulationError, UserError, io_reason, quiet_h5py_unraisable

NAME_MAX = 255          # bytes of one path component, where the file system cannot be asked
PATH_MAX = 4096         # bytes of a whole path (Linux), the terminating NUL included


@dataclass(frozen=True)
class Target:
    """A file a command will write: how the user calls it (``output.path``, ``--json``), where, and its kind (a
    key of :data:`KINDS`)."""
    what: str
    path: Path
    kind: str


# -- recognising cardiosim's own files ------------------------------------------------------------------------------
def _h5_attrs(path: Path) -> dict | None:
    """The root attributes and top-level names of an HDF5 file, or None where it is not one (or cannot be read)."""
    import h5py
    try:
        if not h5py.is_hdf5(str(path)):
            return None
    except OSError:
        return None
    # Without file locking (a file another run is reading); with it where this process has the file open already
    # (a restart's checkpoint): HDF5 refuses to open one file twice with different locking.
    for locking in (False, None):
        try:
            with h5py.File(path, "r", locking=locking) as f:
                attrs = {k: f.attrs[k] for k in f.attrs}
                attrs["/"] = set(f.keys())
                return attrs
        except (OSError, ValueError, RuntimeError):
            continue
    return None


def _text(value) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _json(path: Path):
    try:
        with open(path, "rb") as f:
            head = f.read(64 << 20)
        return json.loads(head)
    except (OSError, ValueError):
        return None


def _head(path: Path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(n)
    except OSError:
        return b""


def _is_run_output(p):
    a = _h5_attrs(p)
    return a is not None and _text(a.get("format", "")) in ("cardiosim-1", "cardiosim-2")


def _is_checkpoint(p):
    a = _h5_attrs(p)
    return a is not None and _text(a.get("format", "")).startswith("cardiosim-checkpoint-")


def _is_cell_output(p):
    a = _h5_attrs(p)
    return a is not None and "cardiosim_version" in a and "model" in a and "trace" in a["/"]


def _is_geometry(p):
    a = _h5_attrs(p)
    if a is None:
        return False
    # Files of cardiosim geometry before the format attribute was added carry these attributes and labels.
    legacy = {"source", "spacing", "origin", "shape"} <= set(a) and "labels" in a["/"]
    return _text(a.get("format", "")) == "cardiosim-geometry-1" or legacy


def _is_xdmf(p):
    head = _head(p)
    return head.startswith(b"<?xml") and b'<Grid Name="cardiosim" GridType="Collection"' in head


def _is_run_summary(p):
    d = _json(p)
    return isinstance(d, dict) and {"config", "equations", "steps", "output"} <= set(d)


def _is_cell_json(p):
    d = _json(p)
    return isinstance(d, dict) and {"model", "cardiosim_version"} <= set(d) and (
        "beats" in d or "restitution" in d or "concentration_response" in d)


def _is_population_csv(p):
    head = _head(p).split(b"\n", 1)[0]
    return head.startswith(b"cell,") and head.rstrip(b"\r").endswith(b",failed,kept")


def _is_kernels_json(p):
    d = _json(p)
    return isinstance(d, list) and bool(d) and all(isinstance(r, dict) and {"variant", "arch"} <= set(r) for r in d)


def _is_png(p):
    head = _head(p)
    # cardiosim plot draws with Matplotlib, which names itself in the PNG's Software text chunk (before the image).
    return head.startswith(b"\x89PNG\r\n\x1a\n") and b"tEXtSoftware\x00Matplotlib" in head


def _tail(path: Path, n: int = 4096) -> bytes:
    try:
        with open(path, "rb") as f:
            f.seek(0, os.SEEK_END)
            f.seek(max(0, f.tell() - n))
            return f.read()
    except OSError:
        return b""


def _is_figure(p):
    """A figure cardiosim plot drew, by the mark Matplotlib leaves in it: a PNG's Software chunk, an SVG's
    'Created with matplotlib' comment, a PDF's Creator (in the trailer's info dictionary, at the end)."""
    head = _head(p)
    return (_is_png(p) or (head.lstrip().startswith(b"<?xml") and b"Created with matplotlib" in head)
            or (head.startswith(b"%PDF") and b"Matplotlib" in _tail(p)))


def _is_vtu(p):
    head = _head(p)
    return b'<VTKFile type="UnstructuredGrid"' in head and b"created by meshio" in head


def _is_movie(p):
    """A movie cardiosim plot --movie wrote, by the comment it leaves in it (cardiosim.output.movie.MARK): in an
    MP4's metadata (at the start: faststart), in a GIF's comment extension (after its palette)."""
    head = _head(p, 1 << 20)
    return (head[4:8] == b"ftyp" or head.startswith(b"GIF89a")) and b"cardiosim plot --movie" in head


def _is_tips_csv(p):
    return _head(p).split(b"\n", 1)[0].rstrip(b"\r") == b"track,t_ms,x_cm,y_cm,charge"


def _is_sweep_table(p):
    if p.suffix == ".h5":
        a = _h5_attrs(p)
        return a is not None and _text(a.get("format", "")) == "cardiosim-sweep-1"
    return _head(p).startswith(b"run,") and b",status" in _head(p).split(b"\n", 1)[0]


def _is_sweep_plan(p):
    if p.suffix == ".sbatch":
        return b"# A SLURM job array of the sweep" in _head(p)
    d = _json(p)
    return isinstance(d, dict) and set(d) == {"config", "runs"}


# kind -> (what it is, in words; how it is recognised)
KINDS = {
    "run": ("a cardiosim result file", _is_run_output),
    "checkpoint": ("a cardiosim checkpoint", _is_checkpoint),
    "xdmf": ("the XDMF sidecar of a cardiosim result file", _is_xdmf),
    "summary": ("the JSON summary of a cardiosim run", _is_run_summary),
    "cell": ("the HDF5 file of a cardiosim cell run", _is_cell_output),
    "cell-json": ("the JSON file of a cardiosim cell run", _is_cell_json),
    "population-csv": ("the table of a cardiosim cell population", _is_population_csv),
    "geometry": ("a cardiosim geometry file", _is_geometry),
    "png": ("a PNG drawn by cardiosim plot", _is_png),
    "kernels-json": ("the JSON file of cardiosim kernels", _is_kernels_json),
    "vtu": ("a VTU file written by cardiosim plot --vtu", _is_vtu),
    "figure": ("an SVG or PDF drawn by cardiosim plot", _is_figure),
    "mp4": ("an MP4 movie written by cardiosim plot --movie", _is_movie),
    "gif": ("a GIF movie written by cardiosim plot --movie", _is_movie),
    "tips-csv": ("the tip table of cardiosim plot --tips", _is_tips_csv),
    "sweep-table": ("the table of a cardiosim sweep", _is_sweep_table),
    "sweep-plan": ("the plan or job script of a cardiosim sweep", _is_sweep_plan),
}


def recognise(path: Path, kind: str) -> bool:
    """Whether ``path`` is a file cardiosim wrote as ``kind`` (by its content, never by its name)."""
    return Path(path).is_file() and KINDS[kind][1](Path(path))


# -- names ----------------------------------------------------------------------------------------------------------
def _limits(path: Path) -> tuple[int, int]:
    """(bytes per name, bytes per path) of the file system that would hold ``path``."""
    parent = Path(os.path.abspath(path)).parent
    while True:
        try:
            if parent.is_dir():
                break
        except OSError:
            pass
        if parent == parent.parent:
            break
        parent = parent.parent
    try:
        return os.pathconf(parent, "PC_NAME_MAX"), os.pathconf(parent, "PC_PATH_MAX")
    except (OSError, ValueError):
        return NAME_MAX, PATH_MAX


def check_name(what: str | None, path) -> None:
    """One line where a name is longer than the file system allows (the OS would say ENAMETOOLONG later, from
    somewhere deep in h5py or the mkdir of a parent). ``what``: how the user calls the file (None: the path says
    it)."""
    name_max, path_max = _limits(Path(path))
    full = os.fsencode(os.path.abspath(path))
    long_part = next((part for part in Path(path).parts if len(os.fsencode(part)) > name_max), None)
    if long_part is not None or len(full) >= path_max:
        shown = str(path) if len(str(path)) <= 60 else f"{str(path)[:40]}...{str(path)[-15:]}"
        raise UserError(f"{what + ': ' if what else ''}{shown}: File name too long (at most {name_max} bytes a "
                        f"name, {path_max - 1} bytes a whole path)")


# -- inputs ---------------------------------------------------------------------------------------------------------
def check_input(what: str | None, path, kind: str = "file", hint: str = "") -> Path:
    """``path`` as a readable file, else one line saying what is wrong: no such file, a directory, not readable,
    a name too long. ``what``: how the user calls it (a key, an option; None: the path says it); ``kind`` names
    the file in the message ("config file", "CellML file", ...); ``hint`` is added where the file is missing."""
    import stat
    path = Path(path)
    where = f"{what}: {path}" if what else str(path)
    check_name(what, path)
    try:
        st = path.stat()
    except FileNotFoundError:
        raise UserError(f"{where}: no such {kind}{hint}") from None
    except NotADirectoryError:
        raise UserError(f"{where}: no such {kind} (a part of the path is not a folder){hint}") from None
    except OSError as e:
        raise UserError(f"{where}: cannot be read ({e.strerror or e})") from None
    if stat.S_ISDIR(st.st_mode):
        raise UserError(f"{where}: is a directory, not a {kind}")
    if not os.access(path, os.R_OK):
        raise UserError(f"{where}: cannot be read (Permission denied)")
    return path


# What a per-point array may hold: booleans, integers or real numbers. Strings, complex numbers (whose imaginary
# part NumPy would drop without a word when they are made real), Python objects and records are refused.
REAL_KINDS = "biuf"
_DTYPE_WORDS = {"c": "complex numbers", "U": "strings", "S": "byte strings", "O": "Python objects",
                "V": "records", "M": "dates", "m": "time differences"}


def check_array_file(what: str, path, dataset: str, hint: str = "") -> None:
    """A per-point input (.npy, or ``dataset`` of an HDF5 file) readable, and an array of real numbers; one line
    naming the file and what is wrong otherwise. Reads the header only (the arrays can be large)."""
    check_input(what, path, hint=hint)
    if str(path).endswith((".h5", ".hdf5")):
        try:
            import h5py
            with h5py.File(path, "r", locking=False) as f:
                ds = f.get(dataset)
                if not isinstance(ds, h5py.Dataset):
                    raise UserError(f"{what}: {path} has no dataset '{dataset}' (it holds: "
                                    f"{', '.join(f) or 'nothing'})")
                dtype = ds.dtype
        except (OSError, ValueError, RuntimeError) as e:
            raise UserError(f"{what}: cannot read {path} as HDF5: {str(e).splitlines()[0] if str(e) else e}") \
                from None
    else:
        import numpy as np
        try:
            arr = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as e:
            raise UserError(f"{what}: cannot read {path} as a .npy array: {str(e).splitlines()[0] if str(e) else e}") \
                from None
        if not isinstance(arr, np.ndarray):
            arr.close()
            raise UserError(f"{what}: {path} is a .npz archive; a per-point file is one .npy array (numpy.save)")
        dtype = arr.dtype
    if dtype.kind not in REAL_KINDS:
        words = _DTYPE_WORDS.get(dtype.kind, f"values of type {dtype}")
        raise UserError(f"{what}: {path} holds {words} (dtype {dtype}); a per-point file holds real numbers "
                        f"(integers, floats or booleans)")


# -- outputs --------------------------------------------------------------------------------------------------------
def _same(a, b) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


def check_writes(targets: list[Target], reads: dict, overwrite: bool) -> None:
    """Refuse, in one line, any of ``targets`` that would destroy an input, another target, or a file that is not
    an earlier result of the same kind (see the module's docstring). ``reads``: {how the user calls it: path} of
    every file the command reads; ``overwrite``: --overwrite was given."""
    check_places(targets, reads)
    check_existing(targets, overwrite)


def check_places(targets: list[Target], reads: dict) -> None:
    """Where the targets go, before anything is made there: no name too long, no target another target or a file
    the command reads, each in a folder that can be written (or made)."""
    seen: dict[str, Target] = {}
    for t in targets:
        check_name(t.what, t.path)
        real = os.path.realpath(t.path)
        if real in seen:
            o = seen[real]
            raise UserError(f"{t.what}: {t.path} is also {o.what} ({o.path}); a command's files must differ "
                            f"(choose another path)")
        seen[real] = t
        for what, p in reads.items():
            if p and _same(p, t.path):
                raise UserError(f"{t.what}: {t.path} is {what}, which this command reads; writing it would "
                                f"destroy it (choose another path)")
        parent = t.path.parent
        while not parent.exists():
            parent = parent.parent
        if not parent.is_dir() or not os.access(parent, os.W_OK | os.X_OK):
            raise UserError(f"{t.what}: cannot write in {parent} (not a writable directory)")


def check_existing(targets: list[Target], overwrite: bool, allow=()) -> None:
    """Each target new, or --overwrite given (``overwrite``) and the file one cardiosim wrote as that kind.
    ``allow``: the ``what`` of targets that may be replaced without --overwrite (a restart's own
    output and checkpoint), still only if recognised."""
    for t in targets:
        _check_target(t, overwrite or t.what in allow)


def _check_target(t: Target, overwrite: bool) -> None:
    p = t.path
    try:
        is_dir, exists = p.is_dir(), p.exists() or p.is_symlink()
    except OSError as e:
        raise UserError(f"{t.what}: {p}: cannot be used ({e.strerror or e})") from None
    if is_dir:
        raise UserError(f"{t.what}: {p} is a directory")
    if exists:
        description = KINDS[t.kind][0]
        if not overwrite:
            if t.kind == "checkpoint":
                raise UserError(f"{t.what}: {p} exists (a checkpoint of an earlier run); resume it with "
                                f"--restart {p}, or pass --overwrite to start afresh")
            raise UserError(f"{t.what}: {p} exists; pass --overwrite to replace it or choose another path")
        if not recognise(p, t.kind):
            raise UserError(f"{t.what}: {p} exists and is not {description}; --overwrite replaces only a file "
                            f"cardiosim wrote as such, never another one: move it away or choose another path")


@contextmanager
def whole(path, what: str):
    """Write ``path`` whole or not at all, as a run writes its output (cardiosim.output.writer): the block writes
    the temporary file it is given, ``.<name>.part`` beside ``path``, which is renamed into place when the block
    ends. A write that fails there (a full disk, ``ulimit -f``: OSError, or HDF5's RuntimeError) removes the
    temporary file, silences HDF5's repeats of the failure as its objects are freed, and is one line naming
    ``what`` (the option or key) and the path, exit status 3: nothing is left there, an earlier file stays as it
    was. An HDF5 file is best opened with ``rdcc_nbytes=0`` (no chunk cache), so that the failure comes from the
    write itself, not from HDF5's closing (where it crashed the process)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    try:
        yield tmp
        os.replace(tmp, path)
    except (OSError, RuntimeError) as e:
        quiet_h5py_unraisable()
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"{what}: cannot write {path} ({io_reason(e)}); nothing written there") from None


def write_h5(path, what: str, fill) -> None:
    """An HDF5 file, made in memory by ``fill(f)`` (an h5py.File) and then written to ``path`` whole (:func:`whole`):
    HDF5 itself never writes to the disk, so a full disk or a file-size limit is an ordinary failed write, one line
    and nothing left there, never HDF5 failing while it closes the file (which left tracebacks and crashed the
    process as it ended, exit status 139). For files whose data are in memory anyway (a population's traces, a
    table): the image costs their size once more."""
    import h5py
    # the core driver without a backing store: the name is only HDF5's, nothing is made under it
    with h5py.File(f"{path}.image", "w", driver="core", backing_store=False) as f:
        fill(f)
        f.flush()
        image = f.id.get_file_image()
    with whole(path, what) as tmp, open(tmp, "wb") as fh:
        fh.write(image)


class FileLock:
    """An exclusive ``flock`` on ``lock_file``, held for the holder's life, with the holder's pid and host written
    in it. A second holder is refused in one line, ``busy(holder)`` (``holder``: what the file says, or ""). The
    lock dies with its process, so a file left by a killed holder is simply taken over (``self.left`` then says
    who left it). Folders made to hold the lock file are removed again (if empty) by ``release(refused=True)``.

    ``prefix`` (the key or option that names the path) starts the other messages. ``quiet_folders``: a folder that
    cannot be made is not this class's to report (the caller's later check says why); the lock is then not held."""

    def __init__(self, lock_file: Path, prefix: str, busy, quiet_folders: bool = False):
        import fcntl
        import socket
        self.path, self.fd, self.made, self.left = lock_file, None, [], ""
        parent = lock_file.parent
        while not (parent.exists() or parent == parent.parent):
            self.made.insert(0, parent)
            parent = parent.parent
        if not self._make_folders(parent, prefix, quiet_folders):
            return
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                self.release(refused=True)
                raise UserError(f"{prefix}: cannot make the lock file {self.path} ({io_reason(e)})") from None
            self.left = os.pread(fd, 200, 0).decode(errors="replace").strip()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                os.close(fd)
                raise UserError(busy(self.left)) from None
            # The previous holder may have removed the file between our open and our lock: then we hold a lock
            # on a name nobody sees; take the current one instead.
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(fd)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"pid {os.getpid()} on {socket.gethostname()}".encode(), 0)
        self.fd = fd

    def _make_folders(self, parent: Path, prefix: str, quiet: bool) -> bool:
        """The missing folders above the lock file made; False where that is impossible and ``quiet``."""
        if parent.exists() and not parent.is_dir() and not quiet:
            raise UserError(f"{prefix}: {parent} is a file, not a folder")
        try:
            for d in list(self.made):
                d.mkdir()
        except OSError as e:
            self.release(refused=True)
            if quiet:
                return False
            raise UserError(f"{prefix}: cannot make the folder ({io_reason(e)})") from None
        return True

    def __del__(self):   # a command whose set-up failed after the claim: the lock file goes with it
        try:
            self.release()
        except Exception:    # at interpreter exit: the process's end releases the lock anyway
            pass

    def release(self, refused: bool = False) -> None:
        """The lock file removed and the lock let go; ``refused``: also the folders made for it (if empty)."""
        if self.fd is not None:
            self.path.unlink(missing_ok=True)
            os.close(self.fd)
            self.fd = None
        if refused:
            for d in reversed(self.made):
                try:
                    d.rmdir()
                except OSError:
                    break
        self.made = []
