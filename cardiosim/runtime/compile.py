"""Compiling and caching native code: the one place that knows where sources live, where compiled objects go and
how a compiled object gets there safely. Both sides import it: the cell side (C drivers, CUDA cell kernels) and the
PDE side (cardiosim.solvers' stencil library). It imports neither of them.

The rule of every per-machine cache here: the file name hashes everything that went into it (sources, flags,
compiler version: :func:`key_digest` of :func:`files_digest`, the flags and :func:`compiler_version`; a shared
library's name is :func:`library_path`); it is built into a temporary file in the same folder and renamed into place (atomic) under an
advisory lock, so MPI ranks starting together neither race nor load a half-written file; a checksum written with
it finds an entry that was cut short or damaged later, which is then made again. A cache that cannot be written (a
read-only home on compute nodes) is still read; new entries then go to a private temporary cache (one line of
warning).

This module must not import mpi4py, petsc4py or PyCUDA at import time: it runs in plain Python too.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

from cardiosim.runtime.errors import UserError

DRIVER = "cpu_driver.c"     # a file every kernels/ folder has: how the folder is recognised


def kernel_dir() -> Path:
    """The folder holding the C/CUDA sources: ``cardiosim/kernels`` in an installed package, else ``kernels/`` at the
    root of a source checkout."""
    here = Path(__file__).resolve().parents[1]             # .../cardiosim
    for cand in (here / "kernels", here.parent / "kernels"):
        if (cand / DRIVER).is_file():
            return cand
    raise RuntimeError(f"cardiosim: cannot find {DRIVER} in {here / 'kernels'} or {here.parent / 'kernels'}")


def cache_root() -> Path:
    """``$CARDIOSIM_CACHE``, else ``~/.cache/cardiosim``: the per-machine cache, one folder per kind."""
    d = os.environ.get("CARDIOSIM_CACHE")
    return Path(d) if d else Path.home() / ".cache" / "cardiosim"


# kind -> the private temporary folder used instead of cache_root()/kind, which cannot be written (this process)
_FALLBACK: dict[str, Path] = {}
_PRIVATE: list[Path] = []        # the one private temporary cache of this process, once made


def cache_dir(kind: str = "native") -> Path:
    """Where new entries of ``kind`` (native, cuda, cellml) go: ``cache_root()/kind``, created if missing; or,
    where that cannot be made or written (a read-only home on compute nodes, a full quota), a private temporary
    folder of this process, removed at its exit, said once in one line. Complete entries of a read-only cache
    are still used (:func:`lookup_dirs`)."""
    if kind not in _FALLBACK:
        shared = cache_root() / kind
        why = _unwritable(shared)
        if why is None:
            return shared
        _fall_back(kind, shared, why)
    return _FALLBACK[kind]


def lookup_dirs(kind: str) -> list[Path]:
    """The folders where entries of ``kind`` are looked for, in order: the machine's cache (read-only or not),
    then this process's private one where it has one."""
    dirs = [cache_root() / kind]
    if kind in _FALLBACK:
        dirs.append(_FALLBACK[kind])
    return dirs


def _unwritable(d: Path) -> str | None:
    """Why new files cannot be made in ``d`` (made if missing), or None."""
    try:
        d.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        return e.strerror or str(e)
    if not os.access(d, os.W_OK | os.X_OK):
        return "not writable"
    return None


def _fall_back(kind: str, shared: Path, why: str) -> None:
    import atexit
    if not _PRIVATE:
        try:
            _PRIVATE.append(Path(tempfile.mkdtemp(prefix="cardiosim-cache-")))
        except OSError as e:
            raise UserError(f"the cache {shared} cannot be written ({why}), nor a temporary folder "
                            f"({e.strerror or e}); set CARDIOSIM_CACHE (or TMPDIR) to a writable folder") from None
        atexit.register(shutil.rmtree, _PRIVATE[0], True)
        if _rank_zero():
            import sys
            print(f"cardiosim: warning: the cache {shared} cannot be written ({why}); generated code goes to a "
                  f"private temporary cache ({_PRIVATE[0]}) and is made again by every run; set CARDIOSIM_CACHE to "
                  f"a writable folder to keep it", file=sys.stderr, flush=True)
    d = _PRIVATE[0] / kind
    d.mkdir(exist_ok=True)
    _FALLBACK[kind] = d


def _rank_zero() -> bool:
    """Whether this process is MPI rank 0 (or not under MPI), from the launchers' environment: this module must
    not import mpi4py, and one warning per job is enough."""
    for var in ("PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID"):
        if var in os.environ:
            return os.environ[var] == "0"
    return True


def header_dir(model) -> Path:
    """The folder holding ``<model.kernel_name>.h``: kernels/, or the cache folder of a model generated from CellML
    (its ``kernel_header_dir``)."""
    return Path(getattr(model, "kernel_header_dir", None) or kernel_dir())


def key_digest(key: Sequence[str]) -> str:
    """SHA-256 (hex) of a cache entry's key: everything that went into it (the sources or their
    :func:`files_digest`, the flags, the compiler's :func:`compiler_version`), joined by NUL."""
    return hashlib.sha256("\0".join(key).encode()).hexdigest()


def files_digest(files: Sequence[Path], root: Path) -> str:
    """SHA-256 (hex) of source files, each by its path relative to ``root`` and its text, in the order given: the
    sources' part of a key (:func:`key_digest`), the same wherever the folder is."""
    h = hashlib.sha256()
    for f in files:
        h.update(f"{os.path.relpath(f, root)}\0{f.read_text()}\0".encode())
    return h.hexdigest()


def compiler_version(argv: Sequence[str], who: str, hint: str = "") -> str:
    """What ``argv`` (a compiler's ``--version``) prints: part of every key, so that another compiler builds anew.
    RuntimeError "<who> does not run (<why>)<hint>" where it cannot be run."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"{who} does not run ({e}){hint}") from e


def library_path(stem: str, key: Sequence[str]) -> Path:
    """Where the shared library ``stem`` made from ``key`` (:func:`key_digest`) goes in the cache:
    ``cache_dir("native")/<stem>_<20 hex digits of the key's digest>.so``; build it there with :func:`compile_once`."""
    return cache_dir("native") / f"{stem}_{key_digest(key)[:20]}.so"


def c_library(source: str, what: str, flags: Sequence[str] = ("-O3", "-std=c99", "-shared", "-fPIC")) -> ctypes.CDLL:
    """kernels/``source`` (a self-contained C file) compiled by ``$CC`` (default cc) into the cache once per machine
    and loaded; ``what`` names its user in an error ("multigrid"). The caller declares the functions' types."""
    cc = os.environ.get("CC", "cc")
    src = kernel_dir() / source
    version = compiler_version([cc, "--version"], f"{what}: the C compiler '{cc}'", "; set CC")
    out = library_path(Path(source).stem, [src.read_text(), cc, *flags, version])
    return ctypes.CDLL(str(compile_once(out, lambda tmp: [cc, *flags, str(src), "-o", tmp],
                                        f"{what}: compiling {source}")))


def compile_once(out: Path, command, what: str) -> Path:
    """``out`` (a path in the cache whose name hashes everything that went into it: :func:`library_path`), built by
    running the compiler argv ``command(tmp)`` that writes ``tmp``, unless it exists (:func:`cached_file`). ``what``
    starts the error message."""
    def build(tmp):
        cmd = command(tmp)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{' '.join(cmd)}\n{r.stderr}")
    return cached_file(out, build)


def cached_file(out: Path, build) -> Path:
    """``out``, made by ``build(tmp)`` unless an intact copy exists: the one rule of every per-machine cache here (the
    C drivers, the multigrid library, the CUDA cubins).

    An entry is a file and its checksum beside it (``<name>.sha256``, :func:`intact`): a truncated or damaged
    entry (a node that died while writing, a full quota) is found and made again. It is made under a lock, into a
    temporary file in the same folder renamed into place, so that ranks starting together neither race nor load a
    half-written file. An intact entry of the machine's cache is used even where that cache is read-only; where it
    cannot be written, the entry is made in this process's private cache instead (:func:`cache_dir`)."""
    for d in [out.parent, *_read_only_twin(out.parent)]:
        if intact(d / out.name):
            return d / out.name
    kind = out.parent.name
    if _unwritable(out.parent) is not None:               # became read-only since cache_dir() was asked
        out = cache_dir(kind) / out.name
    try:
        return _build_entry(out, build)
    except OSError as e:                                  # the cache filled up (a quota) while the entry was written
        if out.parent == _FALLBACK.get(kind):
            raise
        _fall_back(kind, out.parent, e.strerror or str(e))
        return _build_entry(_FALLBACK[kind] / out.name, build)


def _build_entry(out: Path, build) -> Path:
    with file_lock(out.parent / (out.name + ".lock")):
        if intact(out):                                   # another rank built it while we waited
            return out
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.stem + ".", suffix=".tmp")
        os.close(fd)
        try:
            build(tmp)
            _replace_text(_checksum_path(out), _sha256(Path(tmp)))
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return out


def _read_only_twin(folder: Path) -> list[Path]:
    """The machine's cache folder a private folder stands in for (to look for intact entries there first)."""
    for kind, d in _FALLBACK.items():
        if d == folder:
            return [cache_root() / kind]
    return []


def _checksum_path(entry: Path) -> Path:
    return entry.with_name(entry.name + ".sha256")


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def intact(entry: Path) -> bool:
    """Whether a cache entry (a file) is there whole: its checksum, written with it, matches its bytes."""
    try:
        return entry.is_file() and _checksum_path(entry).read_text().strip() == _sha256(entry)
    except OSError:
        return False


def _replace_text(path: Path, text: str) -> None:
    """``path`` holds ``text``, replaced atomically."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def cached_folder(name: str, kind: str, build) -> Path:
    """The folder entry ``name`` of ``kind`` (several files made together: a CellML model's header, NumPy module and
    metadata), made by ``build(tmp_folder)`` unless an intact one exists; the same rules as :func:`cached_file`,
    with a table of the files' checksums (``.sha256`` inside the folder, written last)."""
    for d in lookup_dirs(kind):
        if intact_folder(d / name):
            return d / name
    d = cache_dir(kind) / name
    with file_lock(d.parent / (name + ".lock")):
        if intact_folder(d):
            return d
        tmp = Path(tempfile.mkdtemp(dir=d.parent, prefix=name + "."))
        try:
            build(tmp)
            sums = {p.name: _sha256(p) for p in sorted(tmp.iterdir()) if p.is_file()}
            (tmp / ".sha256").write_text(json.dumps(sums, indent=1))
            if d.exists():                                # damaged: made again
                shutil.rmtree(d)
            os.replace(tmp, d)
        finally:
            if tmp.exists():
                shutil.rmtree(tmp)
    return d


def intact_folder(d: Path) -> bool:
    """Whether a folder entry is whole: every file its checksum table names is there with those bytes."""
    try:
        sums = json.loads((d / ".sha256").read_text())
        return bool(sums) and all(_sha256(d / n) == h for n, h in sums.items())
    except (OSError, ValueError, AttributeError):
        return False


class file_lock:
    """An advisory exclusive lock on a file (fcntl); a no-op where locking is not available."""

    def __init__(self, path: Path):
        self.path = path
        self.fd = None

    def __enter__(self):
        try:
            import fcntl
            self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except (ImportError, OSError):
            if self.fd is not None:
                os.close(self.fd)
            self.fd = None
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            import fcntl
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)


def compile_cached(src: str, options: Sequence[str], arch: str, include_dirs: Sequence[str] = ()) -> bytes:
    """nvcc's cubin of ``src`` (``extern "C"`` not added) for ``arch``, compiled on first use (C++14, else C++17).

    Cached in ``$CARDIOSIM_CACHE/cuda`` (or ``~/.cache/cardiosim/cuda``) under a hash of the source, the options,
    the architecture and nvcc's version (the source carries a digest of the headers it includes). Written to a
    temporary file and renamed (atomic), under a lock: ranks starting together never read a half-written file,
    which PyCUDA's own cache (written in place) does not promise. In a tissue run the node's first GPU rank
    compiles and the others then load from this cache (cardiosim.reaction.ode.cuda_backend.first_then_others).
    Needs no context.
    """
    from pycuda.compiler import compile as nvcc_compile
    nvcc = compiler_version(["nvcc", "--version"], "nvcc", "; put the CUDA toolkit's bin on PATH")
    h = key_digest([src, *options, arch, nvcc])

    def build(tmp):
        errors = []
        for std in ("-std=c++14", "-std=c++17"):         # nvcc 13 may have dropped C++14
            try:
                cubin = nvcc_compile(src, options=[std, *options], arch=arch, include_dirs=list(include_dirs),
                                     no_extern_c=True, cache_dir=False)
                break
            except Exception as e:                       # pycuda.driver.CompileError
                errors.append(str(e))
        else:
            raise RuntimeError("\n".join(errors))
        with open(tmp, "wb") as f:
            f.write(cubin)
    return cached_file(cache_dir("cuda") / f"{h[:32]}_{arch}.cubin", build).read_bytes()

