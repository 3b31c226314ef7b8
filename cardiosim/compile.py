"""Compiling and caching native code: the one place that knows where sources live, where compiled objects go and
how a compiled object gets there safely. Both sides import it: the cell side (C drivers, CUDA cell kernels) and the
PDE side (cardiosim.solvers' stencil library). It imports neither of them.

The rule of every per-machine cache here: the file name hashes everything that went into it (sources, flags,
compiler version); it is built into a temporary file in the same folder and renamed into place (atomic) under an
advisory lock, so MPI ranks starting together neither race nor load a half-written file.

This module must not import mpi4py, petsc4py or PyCUDA at import time: it runs in plain Python too.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Sequence

DRIVER = "cpu_driver.c"     # a file every kernels/ folder has: how the folder is recognised


def kernel_dir() -> Path:
    """The folder holding the C/CUDA sources: ``cardiosim/kernels`` in an installed package, else ``kernels/`` at the
    root of a source checkout."""
    here = Path(__file__).resolve().parent                 # .../cardiosim
    for cand in (here / "kernels", here.parent / "kernels"):
        if (cand / DRIVER).is_file():
            return cand
    raise RuntimeError(f"cardiosim: cannot find {DRIVER} in {here / 'kernels'} or {here.parent / 'kernels'}")



def cache_dir(kind: str = "native") -> Path:
    """``$CARDIOSIM_CACHE/<kind>`` or ``~/.cache/cardiosim/<kind>`` (kind: native, cuda), created if missing."""
    d = os.environ.get("CARDIOSIM_CACHE")
    path = Path(d) / kind if d else Path.home() / ".cache" / "cardiosim" / kind
    path.mkdir(parents=True, exist_ok=True)
    return path



def header_dir(model) -> Path:
    """The folder holding ``<model.kernel_name>.h``: kernels/, or the cache folder of a model generated from CellML
    (its ``kernel_header_dir``)."""
    return Path(getattr(model, "kernel_header_dir", None) or kernel_dir())



def compile_once(out: Path, command, what: str) -> Path:
    """``out`` (a path in the cache whose name hashes everything that went into it), built by running the compiler
    argv ``command(tmp)`` that writes ``tmp``, unless it exists (:func:`cached_file`). ``what`` starts the error
    message."""
    def build(tmp):
        cmd = command(tmp)
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{' '.join(cmd)}\n{r.stderr}")
    return cached_file(out, build)


def cached_file(out: Path, build) -> Path:
    """``out``, made by ``build(tmp)`` unless it exists: under a lock, into a temporary file in the same folder
    renamed into place, so that ranks starting together neither race nor load a half-written file. The one rule of
    every per-machine cache here (the C drivers, the multigrid library, the CUDA cubins)."""
    if out.exists():
        return out
    with file_lock(out.parent / (out.name + ".lock")):
        if out.exists():                                  # another rank built it while we waited
            return out
        fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.stem + ".", suffix=".tmp")
        os.close(fd)
        try:
            build(tmp)
            os.replace(tmp, out)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return out



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
    compiles and the others then load from this cache (reaction.placement.first_then_others). Needs no context.
    """
    from pycuda.compiler import compile as nvcc_compile
    try:
        nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise RuntimeError(f"nvcc does not run ({e}); put the CUDA toolkit's bin on PATH") from e
    h = hashlib.sha256("\0".join([src, *options, arch, nvcc]).encode())

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
    return cached_file(cache_dir("cuda") / f"{h.hexdigest()[:32]}_{arch}.cubin", build).read_bytes()

