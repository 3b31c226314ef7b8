"""Native CPU backend: the C right-hand side of a cell model (``kernels/<model>.h``) in a CPU driver
(``kernels/cpu_driver.c``: Forward Euler on the rhs, or the header's own Rush–Larsen or GRL1 step), compiled with
gcc on first use and called through ctypes.

It gives the same answer as the NumPy reference to round-off and is what single-cell runs use (Bondarenko: about
4·10⁶ cell-steps/s on one core, against ~4·10³ steps/s for NumPy on one cell). It is also how the C rhs that the CUDA kernels include is tested
without a GPU.

Compilation: once per (sources, flags, compiler version), into ``$CARDIOSIM_CACHE`` or ``~/.cache/cardiosim/native``,
by cardiosim.runtime.compile's one rule for every cache. The compiler is ``$CC`` or ``gcc``.

A model plugs in with a class attribute ``kernel_name`` (``"bondarenko"`` -> ``kernels/bondarenko.h``,
``bondarenko_rhs``, ``BONDARENKO_N_STATES``, ``BONDARENKO_N_PARAMS``) and a method ``parameter_vector()`` returning
the float64 vector the header reads with ``CS_PARAM(i)``.

This module must not import mpi4py or petsc4py: it runs in plain Python too.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from cardiosim.runtime.compile import (DRIVER, cache_dir, compile_once, compiler_version, files_digest, kernel_dir,
                                       key_digest, library_path)
from cardiosim.runtime.errors import SimulationError
from cardiosim.cells.stimulus import kernel_layout
from cardiosim.cells.stability import STEP_HINT
from cardiosim.cells.cellml import per_cell_header

CFLAGS = ("-O2", "-std=c99", "-shared", "-fPIC")
LIBS = ("-lm",)


def build(kernel_name: str, header_text: str | None = None, integrator: str = "forward-euler",
          model_dir: Path | None = None, per_cell: bool = False) -> Path:
    """Path of the compiled driver for model ``kernel_name``, compiling it if it is not in the cache yet.
    ``header_text``: a replacement for kernels/<kernel_name>.h (the kernel variants' generated forms, to test them
    on the CPU). ``integrator``: "forward-euler", "rush-larsen" (the header's <kernel_name>_rush_larsen) or "grl1"
    (<kernel_name>_grl1, generated models).
    ``model_dir``: where the model's header is when it is not in kernels/ (a generated model, :func:`header_dir`).
    ``per_cell``: the header reads its per-cell parameters as CS_CELL_PARAM(j) (cardiosim.cells.cellml.per_cell_header)."""
    kdir = kernel_dir()
    header = (model_dir or kdir) / f"{kernel_name}.h"
    if not header.is_file():
        raise RuntimeError(f"native backend: no kernel header {header}")
    cc = os.environ.get("CC", "gcc")
    up = kernel_name.upper()
    defines = (f'-DMODEL_HEADER="{kernel_name}.h"', f"-DMODEL_RHS={kernel_name}_rhs",
               f"-DMODEL_N_STATES={up}_N_STATES", f"-DMODEL_N_PARAMS={up}_N_PARAMS")
    if integrator in STEP_SUFFIX:
        step = kernel_name + STEP_SUFFIX[integrator]
        if f"{step}(" not in (header_text or header.read_text()):
            raise RuntimeError(f"native backend: {header.name} has no {step} step")
        defines += (f"-DMODEL_STEP_RL={step}",)
    elif integrator != "forward-euler":
        raise ValueError(f"unknown integrator '{integrator}'")
    if per_cell:
        defines += ("-DCS_CELL_PARAMS",)
    include = (f"-I{kdir}",)
    # Key: every source the driver could include (all headers of the folder, cheap and safe), flags, compiler.
    key = [files_digest([kdir / DRIVER, *sorted(kdir.glob("*.h"))], kdir)]
    if model_dir is not None:
        key += ["model", header.read_text()]
        include = (f"-I{model_dir}",) + include
    if header_text is not None:
        key += ["override", header_text]
        gen = cache_dir() / f"gen_{key_digest([header_text])[:20]}"
        gen.mkdir(exist_ok=True)
        if not (gen / header.name).exists():           # atomic: a compiler never reads a half-written header
            tmp = gen / f"{header.name}.{os.getpid()}.tmp"
            tmp.write_text(header_text)
            os.replace(tmp, gen / header.name)
        include = (f"-I{gen}",) + include
    cmd_flags = CFLAGS + include + defines
    key += [" ".join((cc,) + CFLAGS + defines + LIBS),      # not -I: the sources are hashed
            compiler_version([cc, "--version"], f"native backend: the C compiler '{cc}'", "; install gcc or set CC")]
    return compile_once(library_path(f"{kernel_name}_cpu", key),
                        lambda tmp: [cc, *cmd_flags, str(kdir / DRIVER), "-o", tmp, *LIBS],
                        f"native backend: compiling {kernel_name}")


_LIBS: dict[Path, ctypes.CDLL] = {}

_dp = ctypes.c_void_p          # double * (raw addresses: much cheaper per call than POINTER(c_double) casts)


def _load(path: Path) -> ctypes.CDLL:
    if path not in _LIBS:
        lib = ctypes.CDLL(str(path))
        lib.cs_n_states.restype = ctypes.c_int
        lib.cs_n_params.restype = ctypes.c_int
        lib.cs_rhs.argtypes = [_dp, _dp, ctypes.c_double, _dp]
        lib.cs_rhs.restype = None
        lib.cs_advance.argtypes = [_dp, ctypes.c_long, ctypes.c_double, ctypes.c_double, ctypes.c_int,
                                   ctypes.c_int, _dp, _dp, _dp, ctypes.c_long, _dp, _dp,
                                   ctypes.POINTER(ctypes.c_long), ctypes.POINTER(ctypes.c_int), _dp, _dp, _dp]
        lib.cs_advance.restype = ctypes.c_int
        if hasattr(lib, "cs_set_cell_pitch"):
            lib.cs_set_cell_pitch.argtypes = [ctypes.c_long]
            lib.cs_set_cell_pitch.restype = None
        _LIBS[path] = lib
    return _LIBS[path]


INTEGRATOR_NAMES = {"forward-euler": "Forward Euler", "rush-larsen": "Rush-Larsen", "grl1": "GRL1"}
# The header's own step function of each integrator but Forward Euler: <kernel_name><suffix>(y, dt, i_stim, p).
STEP_SUFFIX = {"rush-larsen": "_rush_larsen", "grl1": "_grl1"}


def _ptr(a: np.ndarray | None):
    return None if a is None else a.ctypes.data


class NativeModel:
    """A cell model's C right-hand side in the CPU driver, stepped by ``integrator`` (INTEGRATOR_NAMES).

    ``model`` is a :class:`~cardiosim.cells.base.CellModel` with ``kernel_name`` and ``parameter_vector()``; its
    parameters (variant, overrides) are taken at construction. ``per_cell``: a generated model's population header
    (cardiosim.cells.cellml.per_cell_header: the parameters it keeps at run time read per cell, ``self.slots``
    their indices into parameter_vector()), the host twin of the GPU population kernel; :meth:`advance` then takes
    ``params`` of shape (n_slots, n_cells).
    """

    def __init__(self, model, header_text: str | None = None, integrator: str = "forward-euler",
                 per_cell: bool = False):
        name = model.kernel_name
        if not name or not hasattr(model, "parameter_vector"):
            raise RuntimeError(f"cell model {model.name} has no native (C) kernel")
        self.model = model
        self.integrator = integrator
        self.slots = None
        folder = Path(model.kernel_header_dir) if getattr(model, "kernel_header_dir", None) else None
        if per_cell:
            if not hasattr(model, "keep_at_run_time"):
                raise RuntimeError(f"cell model {model.name}: per-cell parameters need a generated (CellML) model")
            folder, self.slots = per_cell_header(model)
        self.lib = _load(build(name, header_text, integrator, folder, per_cell))
        self.params = np.ascontiguousarray(model.parameter_vector(), dtype=np.float64)
        if self.lib.cs_n_states() != model.n_states or self.lib.cs_n_params() != self.params.size:
            raise RuntimeError(
                f"native backend: {name}.h has {self.lib.cs_n_states()} states / {self.lib.cs_n_params()} "
                f"parameters, the Python model {model.n_states} / {self.params.size}")
        self.lower = np.array([s.lower for s in model.states], dtype=np.float64)
        self.upper = np.array([s.upper for s in model.states], dtype=np.float64)
        # raw addresses of the arrays every call passes; _keep holds the arrays alive whatever happens to the above
        self._keep = (self.params, self.lower, self.upper)
        self._p, self._lo, self._hi = (a.ctypes.data for a in self._keep)

    def rhs(self, y: np.ndarray, i_stim: float = 0.0) -> np.ndarray:
        """dy/dt of one cell (y: n_states values), from the C code. For tests."""
        y = np.ascontiguousarray(y, dtype=np.float64)
        if y.shape != (self.model.n_states,):
            raise ValueError(f"y must have shape ({self.model.n_states},), got {y.shape}")
        out = np.empty_like(y)
        self.lib.cs_rhs(_ptr(y), _ptr(out), float(i_stim), _ptr(self.params))
        return out

    def stimulus(self, protocols: Sequence = (), amps=None, n_cells: int = 1) -> "NativeStimulus":
        """The stimulus in the driver's layout, to build once and pass to :meth:`advance` many times.

        ``protocols``: pulse trains with ``start, duration, period, count`` (:class:`cardiosim.cells.stimulus.Protocol`);
        ``amps``: their currents in pA/pF (negative depolarises), shape (n_protocols, n_cells), or one number per
        protocol for all cells."""
        n_p = len(protocols)
        if n_p == 0:
            return NativeStimulus(np.zeros(4), np.zeros(1), 0, n_cells)
        proto, a = kernel_layout(protocols, amps, n_cells)
        return NativeStimulus(proto, a, n_p, n_cells)

    def advance(self, y: np.ndarray, t0: float, dt: float, k: int, protocols=(), amps=None,
                check_range: bool = True, track_dvdt: bool = False, params: np.ndarray | None = None):
        """k substeps of ``dt`` ms (the integrator's) from ``t0`` ms, in place on ``y`` (n_states, n_cells), float64,
        C-contiguous. Substep s evaluates the rhs and the stimulus at t0 + s*dt.

        ``protocols``, ``amps``: as for :meth:`stimulus`, or ``protocols`` a :class:`NativeStimulus` from it (saves
        the conversion, ~10 µs, on every call). ``check_range``: also check the states' admissible ranges at the end
        (non-finite values are always checked, at every substep). With ``track_dvdt``, returns (dvdt_max,
        t_dvdt_max), the largest dV/dt (mV/ms) per cell over the substeps and the time it was evaluated at (ms);
        else None. ``params``: every cell its own parameter vector, (n_cells, n_params) C-contiguous float64 (a
        population, cardiosim.single_cell.population), or with ``per_cell`` its own values of the slots, (n_slots, n_cells);
        default: the model's, for every cell.

        Raises SimulationError naming the cell, the state, its value and the time when a state goes bad; the
        state of that cell is left as it was at that moment, the cells after it are not advanced.
        """
        if not (isinstance(y, np.ndarray) and y.dtype == np.float64 and y.flags.c_contiguous and y.ndim == 2
                and y.shape[0] == self.model.n_states):
            raise ValueError(f"y must be a C-contiguous float64 array of shape ({self.model.n_states}, n_cells)")
        n_cells = y.shape[1]
        stim = protocols if isinstance(protocols, NativeStimulus) else self.stimulus(protocols, amps, n_cells)
        if stim.n_cells != n_cells:
            raise ValueError(f"the stimulus was prepared for {stim.n_cells} cells, y has {n_cells}")
        dmax = tmax = None
        if track_dvdt:
            dmax = np.empty(n_cells)
            tmax = np.empty(n_cells)
        bad_cell = ctypes.c_long(-1)
        bad_state = ctypes.c_int(-1)
        bad_t = ctypes.c_double(np.nan)
        lo, hi = (self._lo, self._hi) if check_range else (None, None)
        p, stride = self._p, 0
        if self.slots is not None:
            if not (isinstance(params, np.ndarray) and params.dtype == np.float64 and params.flags.c_contiguous
                    and params.shape == (len(self.slots), n_cells)):
                raise ValueError(f"params must be a C-contiguous float64 array of shape ({len(self.slots)}, "
                                 f"{n_cells}): the per-cell slots")
            self.lib.cs_set_cell_pitch(n_cells)
            p, stride = params.ctypes.data, 1
        elif params is not None:
            if not (isinstance(params, np.ndarray) and params.dtype == np.float64 and params.flags.c_contiguous
                    and params.shape == (n_cells, self.params.size)):
                raise ValueError(f"params must be a C-contiguous float64 array of shape ({n_cells}, "
                                 f"{self.params.size})")
            p, stride = params.ctypes.data, self.params.size
        status = self.lib.cs_advance(y.ctypes.data, n_cells, float(t0), float(dt), int(k), stim.n_protocols,
                                     stim.proto.ctypes.data, stim.amp.ctypes.data, p, stride, lo, hi,
                                     ctypes.byref(bad_cell), ctypes.byref(bad_state), ctypes.byref(bad_t),
                                     _ptr(dmax), _ptr(tmax))
        if status:
            c, s = bad_cell.value, bad_state.value
            st = self.model.states[s]
            v = y[s, c]
            what = "is not finite" if status == 1 else f"is outside its range [{st.lower:g}, {st.upper:g}]"
            raise SimulationError(
                f"{self.model.name}: cell {c}, state {st.name} = {v:.6g} {st.unit} {what} at t = {bad_t.value:.6g} ms "
                f"({INTEGRATOR_NAMES[self.integrator]}, dt = {dt:g} ms){STEP_HINT}")
        return (dmax, tmax) if track_dvdt else None


@dataclass(frozen=True)
class NativeStimulus:
    """Pulse trains in the driver's layout: proto = (start, duration, period, count) per protocol, flattened;
    amp[p, c] in pA/pF. Build with :meth:`NativeModel.stimulus`."""

    proto: np.ndarray
    amp: np.ndarray
    n_protocols: int
    n_cells: int
