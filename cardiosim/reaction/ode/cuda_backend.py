"""CUDA backend: the cell model's C right-hand side (``kernels/<model>.h``) in the fused kernel (``kernels/fused.cu``:
k substeps of Forward Euler, Rush–Larsen or GRL1 per launch), compiled with nvcc through PyCUDA (cached:
:func:`compile_cached`) for the model chosen at compile time.

The state lives on the device in a pitched structure of arrays (one row per state); :meth:`CudaBackend.advance`
does k substeps in one launch, the same arithmetic as :class:`cardiosim.reaction.ode.native.NativeModel.advance` (to
round-off: the GPU contracts a*b+c into fused multiply-adds unless compiled with ``fmad=False``, and its exp/log
differ from glibc's by an ulp). Parameters, admissible ranges and pulse trains sit in ``__constant__`` memory; the
per-cell amplitudes in global memory.

PyCUDA is imported inside the class, so importing this module needs no PyCUDA. The context is the device's primary
context (the one PETSc's CUDA objects use too), pushed around every call and popped after: the backend can live
next to PETSc in one process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from cardiosim.runtime.errors import SimulationError
from cardiosim.cells.stimulus import kernel_layout
from cardiosim.cells.stability import STEP_HINT
from cardiosim.reaction.ode import kernel_variants
from cardiosim.runtime.compile import compile_cached, files_digest, header_dir, kernel_dir, key_digest
from cardiosim.runtime.gpu import PrimaryContext, arch_of, import_pycuda
from cardiosim.runtime.mpi import root_then_all
from cardiosim.cells.cellml import per_cell_header
from cardiosim.reaction.ode.native import STEP_SUFFIX

KERNEL = "fused.cu"
FUNCTION = "cs_fused_euler"
MAX_PROTOCOLS = 16
DEFAULT_BLOCK = 128
MAXRREG_ENV = "CARDIOSIM_CELL_MAXRREG"   # ptxas's register cap for the cell kernel; unset: auto_cap's cap
# The caps auto_cap tries, largest first: on an H200 (fused Forward Euler) 168 for Bondarenko and O'Hara-Rudy and
# 128 for TT06 buy more resident warps than their spills cost, and more cell-steps/s
# (docs/decisions/0022-cell-kernel-register-cap-by-occupancy.md).
AUTO_CAPS = (168, 128)
BLOCK_ENV = "CARDIOSIM_CELL_BLOCK"       # threads per block where the caller names none; unset: DEFAULT_BLOCK


def _env_int(environ, name: str, low: int, high: int, what: str) -> int | None:
    """The integer in ``environ[name]``, None where it is unset, empty or "none"; ValueError outside [low, high]."""
    text = (environ.get(name) or "").strip()
    if not text or text.lower() == "none":
        return None
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: {what} must be an integer (or unset)") from None
    if not low <= value <= high:
        raise ValueError(f"{name}={value}: {what} must lie in [{low}, {high}]")
    return value


def register_cap_options(environ=None) -> list[str]:
    """nvcc's register cap for the cell kernel from ``$CARDIOSIM_CELL_MAXRREG`` (``-maxrregcount=N``, N in
    [16, 255]); [] where it is unset, empty, "auto" or "none" (for those, :func:`auto_cap_enabled` says whether the
    backend then picks a cap itself). A cap trades spills to local memory for resident warps
    (tools/gpu/cell_kernel_occupancy.py measures it)."""
    environ = os.environ if environ is None else environ
    if auto_cap_enabled(environ) or (environ.get(MAXRREG_ENV) or "").strip().lower() == "none":
        return []
    cap = _env_int(environ, MAXRREG_ENV, 16, 255, "the register cap")
    return [] if cap is None else [f"-maxrregcount={cap}"]


def auto_cap_enabled(environ=None) -> bool:
    """Whether the fused kernel's register cap is :func:`auto_cap`'s: ``$CARDIOSIM_CELL_MAXRREG`` unset, empty or
    "auto" ("none": no cap; a number: that cap)."""
    text = ((os.environ if environ is None else environ).get(MAXRREG_ENV) or "").strip().lower()
    return text in ("", "auto")


def warps_per_sm(registers: int, block: int, regs_per_sm: int = 65536, max_warps: int = 64, max_blocks: int = 32,
                 sub_partitions: int = 4, granularity: int = 256) -> int:
    """Resident warps per SM of a kernel with ``registers`` per thread and ``block`` threads per block, limited by
    registers and warps only (no shared memory here), as CUDA's occupancy calculator (cuda_occupancy.h) counts on
    sm_80/sm_90: registers go to warps in units of ``granularity`` and each of the SM's ``sub_partitions`` holds its
    own quarter of the register file, so warps per SM = 4 x floor(16384 / warp's registers); whole blocks only."""
    warps_per_block = -(-block // 32)
    per_warp = -(-registers * 32 // granularity) * granularity
    by_regs = (regs_per_sm // sub_partitions // per_warp) * sub_partitions // warps_per_block
    blocks = min(by_regs, max_warps // warps_per_block, max_blocks)
    return blocks * warps_per_block


def auto_cap(registers: int, block: int) -> int | None:
    """The register cap for a kernel that ptxas gave ``registers`` per thread, launched in blocks of ``block``: the
    largest of AUTO_CAPS under which more warps fit on an SM than now (:func:`warps_per_sm`),
    None where none does. Only occupancy bought by a cap pays for its spills: at block 256 a cap of 168 leaves
    Bondarenko at 8 warps (5.20e9 against 5.37e9 uncapped), so 128 (16 warps) is taken there."""
    now = warps_per_sm(registers, block)
    return next((c for c in AUTO_CAPS if c < registers and warps_per_sm(c, block) > now), None)


def second_cap(variant, options: Sequence[str], registers: int, block: int) -> int | None:
    """The cap to compile ``variant`` under again after a first compile with ``options`` gave ``registers`` per
    thread: :func:`auto_cap`'s, for the fused kernel where neither ``options`` nor ``$CARDIOSIM_CELL_MAXRREG``
    names one; None: the first compile stands."""
    if not variant.fused or not auto_cap_enabled() or any("maxrregcount" in o for o in options):
        return None
    return auto_cap(registers, block)


def default_block(environ=None) -> int:
    """Threads per block of the cell kernel where the caller passes none: ``$CARDIOSIM_CELL_BLOCK`` (a multiple of
    32 in [32, 1024]), else DEFAULT_BLOCK (128)."""
    block = _env_int(os.environ if environ is None else environ, BLOCK_ENV, 32, 1024, "the block size")
    if block is None:
        return DEFAULT_BLOCK
    if block % 32:
        raise ValueError(f"{BLOCK_ENV}={block}: the block size must be a multiple of 32 (a warp)")
    return block


def nvcc_options(fmad: bool = True, options: Sequence[str] = (), environ=None) -> list[str]:
    """The nvcc options :class:`CudaBackend` adds to :func:`kernel_source`'s: FMA contraction, the register cap of
    :func:`register_cap_options` (none unless ``$CARDIOSIM_CELL_MAXRREG`` is set, or where ``options`` already names
    one) and ``options``."""
    cap = [] if any("maxrregcount" in o for o in options) else register_cap_options(environ)
    return [f"--fmad={'true' if fmad else 'false'}", *cap, *options]


def kernel_source(model, params: np.ndarray, variant, integrator: str = "forward-euler",
                  per_cell: bool = False) -> tuple[str, list[str]]:
    """The CUDA source and nvcc -D options of ``variant`` (a kernel_variants.Variant) for ``model``; also what
    ``cardiosim kernels`` compiles. ``integrator``: "forward-euler", "rush-larsen" (the header's
    <kernel_name>_rush_larsen) or "grl1" (<kernel_name>_grl1, generated models); the last two fused kernel only.
    ``per_cell``: a population's kernel (fused only, generated models): the header of
    cardiosim.cells.cellml.per_cell_header, its kept parameters read per cell (-DCS_CELL_PARAMS=1)."""
    kdir = kernel_dir()
    name = model.kernel_name
    folder = per_cell_folder(model) if per_cell else header_dir(model)
    if per_cell and not variant.fused:
        raise ValueError("per-cell parameters need the fused kernel variant")
    header = (folder / f"{name}.h").read_text()
    step = STEP_SUFFIX.get(integrator)
    if step and (f"{name}{step}(" not in header or not variant.fused):
        raise ValueError(f"{integrator} needs {name}{step} in {name}.h and the fused kernel variant")
    src, defines = kernel_variants.source((kdir / KERNEL).read_text(), header, name, params, variant)
    # PyCUDA's cache keys on the source text and options only: add a digest of the headers it includes (a generated
    # model's header lives outside kernels/).
    headers = key_digest([files_digest(sorted(kdir.glob("*.h")), kdir), "model", header])
    src = f"// headers: {headers[:20]}\n" + src
    opts = [f"-DCS_MODEL={name}", f"-DCS_MODEL_UP={name.upper()}", f"-DCS_N_STATES={model.n_states}",
            f"-DCS_N_PARAMS={params.size}", f"-DCS_MAX_PROTOCOLS={MAX_PROTOCOLS}",
            f"-DCS_RUSH_LARSEN={int(step is not None)}", *([f"-DCS_STEP={step}"] if step else []), *defines,
            *(["-DCS_CELL_PARAMS=1"] if per_cell else [])]
    return src, opts


def per_cell_folder(model):
    """The folder of ``model``'s per-cell header (a generated model whose population parameters it keeps at run
    time); ValueError for a hand-written model."""
    if not hasattr(model, "keep_at_run_time"):
        raise ValueError(f"{model.name}: per-cell parameters on the GPU need a generated (CellML) model; the "
                         f"hand-written headers read every parameter from constant memory")
    return per_cell_header(model)[0]


@dataclass(frozen=True)
class CudaStimulus:
    """Pulse trains for :meth:`CudaBackend.advance`: proto (start, duration, period, count per protocol, flattened,
    host) and the amplitudes amp[p, c] in pA/pF already on the device. Build with :meth:`CudaBackend.stimulus`."""

    proto: np.ndarray
    amp: object            # pycuda DeviceAllocation, or None when there are no protocols
    n_protocols: int
    n_cells: int


class CudaBackend:
    """A cell model on one GPU: state on the device, k substeps of its integrator per launch.

    ``model``: a :class:`~cardiosim.cells.base.CellModel` with ``kernel_name`` and ``parameter_vector()``.
    ``states``: the initial state, float64 (n_states, n_cells); uploaded at once. ``device``: CUDA ordinal.
    ``fmad``: let nvcc contract multiply-adds into FMAs (default, faster); False for a closer match to the CPU.
    ``block``: threads per block (default :func:`default_block`: ``$CARDIOSIM_CELL_BLOCK``, else 128).
    ``options``: extra nvcc options (a register cap also from ``$CARDIOSIM_CELL_MAXRREG``: :func:`nvcc_options`).
    ``variant``: the kernel variant (cardiosim.reaction.ode.kernel_variants: the seed's ``original`` ... ``all``, one
    substep per launch, or ``fused``).
    ``integrator``: "forward-euler", or "rush-larsen" or "grl1" where the model's header has that step (as for
    :func:`kernel_source`).
    ``cell_params``: a population (cardiosim.single_cell.population, generated models): every cell its own values of the
    parameters the model keeps at run time, (n_slots, n_cells) in the order of
    cardiosim.cells.cellml.per_cell_header's slots; they live in device memory, the rest are literals.
    """

    def __init__(self, model, states: np.ndarray, device: int = 0, fmad: bool = True, block: int | None = None,
                 options: Sequence[str] = (), variant: str = kernel_variants.DEFAULT,
                 integrator: str = "forward-euler", cell_params: np.ndarray | None = None):
        cuda = import_pycuda()
        self.cuda = cuda
        name = model.kernel_name
        if not name or not hasattr(model, "parameter_vector"):
            raise RuntimeError(f"cell model {model.name} has no C kernel for the CUDA backend")
        self.model = model
        self.n_states = model.n_states
        states = np.asarray(states, dtype=np.float64)
        if states.ndim != 2 or states.shape[0] != self.n_states:
            raise ValueError(f"states must have shape ({self.n_states}, n_cells), got {states.shape}")
        self.n_cells = int(states.shape[1])
        if self.n_cells >= 2**31:
            raise ValueError("the CUDA backend indexes cells with int: at most 2^31-1 cells per device")
        self.params = np.ascontiguousarray(model.parameter_vector(), dtype=np.float64)
        self.block = int(block) if block is not None else default_block()
        self.variant = kernel_variants.get(variant, name)
        self.integrator = integrator
        self._last_k = 1
        self.per_cell = cell_params is not None
        if self.per_cell:
            slots = per_cell_header(model)[1]
            cell_params = np.ascontiguousarray(cell_params, dtype=np.float64)
            if cell_params.shape != (len(slots), self.n_cells):
                raise ValueError(f"cell_params must have shape ({len(slots)}, {self.n_cells}) (the per-cell slots), "
                                 f"got {cell_params.shape}")

        self.ctx = PrimaryContext(device)
        self.device = self.ctx.device
        self.ctx.push()
        try:
            kdir = kernel_dir()
            src, opts = kernel_source(model, self.params, self.variant, integrator, self.per_cell)
            opts += nvcc_options(fmad, options)
            dirs = [str(per_cell_folder(model) if self.per_cell else header_dir(model)), str(kdir)]
            mod = self._compile(src, opts, dirs)
            # compiled once as ptxas likes (cached), and again under auto_cap's cap where that fits more warps
            cap = second_cap(self.variant, opts, mod.get_function(FUNCTION).num_regs, self.block)
            if cap:
                opts = [*opts, f"-maxrregcount={cap}"]
                mod = self._compile(src, opts, dirs)
            self.options = opts
            # what was compiled, for the ranks of a node to compare (first_then_others)
            self.source_digest = key_digest([src, *opts])
            self.module = mod
            self.func = mod.get_function(FUNCTION)
            self.func.prepare("PqiddiiPiPPPP" + ("P" if self.per_cell else ""))
            self.cell_params = None
            if self.per_cell:
                self.cell_params = cuda.to_device(cell_params) if self.n_cells else None
                ptr, _ = self.module.get_global("c_cell_pitch")
                cuda.memcpy_htod(ptr, np.array([self.n_cells], dtype=np.int64))
            elif not self.variant.initialised_params:
                self._upload("c_params", self.params)
            self._upload("c_lower", np.array([s.lower for s in model.states], dtype=np.float64))
            self._upload("c_upper", np.array([s.upper for s in model.states], dtype=np.float64))
            self._proto_on_device = None
            # pitched SoA state (one column at least: a rank of a masked grid may have no tissue, hence no cells)
            self.y, pitch_bytes = cuda.mem_alloc_pitch(max(self.n_cells, 1) * 8, self.n_states, 8)
            self.pitch = pitch_bytes // 8
            self.aux = None
            if self.variant.aux:
                self.aux, aux_pitch = cuda.mem_alloc_pitch(max(self.n_cells, 1) * 8, self.n_states, 8)
                assert aux_pitch == pitch_bytes
            self.bad = cuda.mem_alloc(4 * 4)
            cuda.memset_d32(self.bad, 0, 4)
            self.stream = None           # None: the legacy default stream; else :meth:`use_own_stream`'s
            self._dvdt = None
            self._to_device(states)
        finally:
            self.ctx.pop()

    def _compile(self, src: str, opts: list[str], dirs: list[str]):
        try:
            return self.cuda.module_from_buffer(compile_cached(src, opts, arch_of(self.device), dirs))
        except RuntimeError as e:
            raise RuntimeError(f"CUDA backend: compiling {KERNEL} ({self.variant.name}) for "
                               f"{self.model.kernel_name} failed:\n{e}")

    # -- context -------------------------------------------------------------------------------------------------
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _push(self):
        self.ctx.push()

    def _pop(self):
        self.ctx.pop()

    def close(self):
        """Free the device memory and release the primary context (the backend is unusable after)."""
        if getattr(self, "ctx", None) is None:
            return
        self.ctx.push()
        try:
            for a in (self.y, self.bad, self.aux, getattr(self, "cell_params", None)):
                if a is not None:
                    a.free()
            if self._dvdt is not None:
                for a in self._dvdt:
                    a.free()
        finally:
            self.ctx.pop()
            self.ctx.release()
            self.ctx = None

    def _upload(self, symbol: str, values: np.ndarray):
        ptr, size = self.module.get_global(symbol)
        values = np.ascontiguousarray(values, dtype=np.float64)
        if values.nbytes > size:
            raise ValueError(f"{symbol}: {values.nbytes} bytes do not fit its {size}")
        self.cuda.memcpy_htod(ptr, values)

    # -- state ---------------------------------------------------------------------------------------------------
    def _copy2d(self):
        cp = self.cuda.Memcpy2D()
        cp.width_in_bytes = self.n_cells * 8
        cp.height = self.n_states
        return cp

    def _to_device(self, states):
        states = np.ascontiguousarray(states, dtype=np.float64)
        if states.shape != (self.n_states, self.n_cells):
            raise ValueError(f"states must have shape ({self.n_states}, {self.n_cells}), got {states.shape}")
        if not self.n_cells:
            return
        cp = self._copy2d()
        cp.set_src_host(states)
        cp.src_pitch = self.n_cells * 8
        cp.set_dst_device(self.y)
        cp.dst_pitch = self.pitch * 8
        cp(aligned=True)

    def to_device(self, states: np.ndarray) -> None:
        """Replace the device state by ``states`` (n_states, n_cells)."""
        self._push()
        try:
            self._to_device(states)
        finally:
            self._pop()

    def from_device(self) -> np.ndarray:
        """The device state as a new float64 array (n_states, n_cells)."""
        out = np.empty((self.n_states, self.n_cells), dtype=np.float64)
        if not self.n_cells:
            return out
        self._push()
        try:
            cp = self._copy2d()
            cp.set_src_device(self.y)
            cp.src_pitch = self.pitch * 8
            cp.set_dst_host(out)
            cp.dst_pitch = self.n_cells * 8
            cp(aligned=True)
        finally:
            self._pop()
        return out

    def set_row(self, s: int, values: np.ndarray) -> None:
        """Overwrite state row ``s`` on the device (e.g. Vm from the PDE solve)."""
        if not self.n_cells:
            return
        self._push()
        try:
            self.cuda.memcpy_htod(int(self.y) + s * self.pitch * 8, np.ascontiguousarray(values, dtype=np.float64))
        finally:
            self._pop()

    def get_row(self, s: int, out: np.ndarray) -> None:
        """Copy state row ``s`` from the device into ``out`` (float64, C-contiguous, n_cells)."""
        if not self.n_cells:
            return
        self._push()
        try:
            self.cuda.memcpy_dtoh(out, int(self.y) + s * self.pitch * 8)
        finally:
            self._pop()

    def use_own_stream(self) -> None:
        """Launch, copy rows (:meth:`set_row_queued`, :meth:`get_row_queued`) and read the error flag on a stream of
        this backend's own that does not wait for the legacy default stream: its kernels run beside the others
        (a small network's cells beside the tissue's). The whole-state copies (:meth:`to_device`,
        :meth:`from_device`) stay on the default stream: :meth:`synchronize` first."""
        self._push()
        try:
            self.cuda.Context.synchronize()               # what the default stream has queued (the states) first
            self.stream = self.cuda.Stream(flags=1)       # CU_STREAM_NON_BLOCKING
            self._flag = self.cuda.pagelocked_empty(4, np.int32)
        finally:
            self._pop()

    def set_row_queued(self, s: int, values: np.ndarray) -> None:
        """Queue the copy of ``values`` (page-locked, float64, n_cells) into state row ``s``, before what is
        launched next on this backend's stream; ``values`` must not change until that has run."""
        self._push()
        try:
            if self.n_cells:
                self.cuda.memcpy_htod_async(int(self.y) + s * self.pitch * 8, values, self.stream)
        finally:
            self._pop()

    def get_row_queued(self, s: int, out: np.ndarray):
        """Queue the copy of state row ``s`` into ``out`` (page-locked, float64, n_cells) behind the kernels already
        launched on this backend's stream; returns the event to synchronise on before reading ``out``."""
        self._push()
        try:
            if self.n_cells:
                self.cuda.memcpy_dtoh_async(out, int(self.y) + s * self.pitch * 8, self.stream)
            done = self.cuda.Event()
            done.record(self.stream)
        finally:
            self._pop()
        return done

    # -- stimulus ------------------------------------------------------------------------------------------------
    def stimulus(self, protocols: Sequence = (), amps=None) -> CudaStimulus:
        """Pulse trains (``start, duration, period, count``: :class:`cardiosim.cells.stimulus.Protocol`) and their currents
        in pA/pF, shape (n_protocols, n_cells) or one number per protocol; the amplitudes go to the device once."""
        n_p = len(protocols)
        if n_p == 0:
            return CudaStimulus(np.zeros(0), None, 0, self.n_cells)
        if n_p > MAX_PROTOCOLS:
            raise ValueError(f"the CUDA backend takes at most {MAX_PROTOCOLS} stimulus protocols, got {n_p}")
        proto, a = kernel_layout(protocols, amps, self.n_cells)
        if not self.n_cells:
            return CudaStimulus(proto, None, n_p, 0)
        self._push()
        try:
            amp = self.cuda.to_device(a)
        finally:
            self._pop()
        return CudaStimulus(proto, amp, n_p, self.n_cells)

    # -- stepping ------------------------------------------------------------------------------------------------
    def advance(self, t0: float, dt: float, k: int, protocols=(), amps=None, check_range: bool = True,
                track_dvdt: bool = False, check: bool = True):
        """k substeps of ``dt`` ms (the integrator's) from ``t0`` ms on the device state; substep j evaluates the
        rhs and the stimulus at t0 + j*dt (as NativeModel.advance).

        ``protocols``/``amps``: as for :meth:`stimulus`, or ``protocols`` a :class:`CudaStimulus` from it (no upload
        of the amplitudes per call). ``check_range``: check the admissible ranges at the end of the launch
        (non-finite values are checked at every substep). ``track_dvdt``: return (dvdt_max, t_dvdt_max) per cell
        (host arrays). ``check``: read the error flag after the launch (a synchronisation); with False, call
        :meth:`check` later. Raises SimulationError naming the cell, state, value and time.
        """
        stim = protocols if isinstance(protocols, CudaStimulus) else self.stimulus(protocols, amps)
        if stim.n_cells != self.n_cells:
            raise ValueError(f"the stimulus was prepared for {stim.n_cells} cells, the backend has {self.n_cells}")
        self._push()
        try:
            if stim.n_protocols and (self._proto_on_device is None
                                     or not np.array_equal(self._proto_on_device, stim.proto)):
                self._upload("c_proto", stim.proto)
                self._proto_on_device = stim.proto.copy()
                if self.stream is not None:       # the copy went by the default stream, which ours does not wait for
                    self.cuda.Context.synchronize()
            d1 = d2 = np.intp(0)
            if track_dvdt:
                if not self.variant.fused:
                    raise ValueError("track_dvdt needs the fused kernel variant (one launch per call)")
                if self._dvdt is None:
                    self._dvdt = (self.cuda.mem_alloc(self.n_cells * 8), self.cuda.mem_alloc(self.n_cells * 8))
                d1, d2 = self._dvdt
            grid = ((self.n_cells + self.block - 1) // self.block, 1)
            amp = stim.amp if stim.amp is not None else np.intp(0)
            aux = self.aux if self.aux is not None else np.intp(0)
            extra = (self.cell_params,) if self.per_cell else ()
            # The seed's variants launch once per substep, at t0 + j*dt: the time the fused kernel computes for
            # substep j (both round the product and the sum once), so the pulse edges fall on the same substeps.
            launches = [(t0, k)] if self.variant.fused else [(t0 + j * dt, 1) for j in range(k)]
            self._last_k = k
            for n, (t, kk) in enumerate(launches if self.n_cells else ()):
                last = n == len(launches) - 1
                args = (self.y, np.int64(self.pitch), np.int32(self.n_cells), float(t), float(dt), np.int32(kk),
                        np.int32(stim.n_protocols), amp, np.int32(bool(check_range) and last), self.bad, d1, d2,
                        aux, *extra)
                if self.stream is None:
                    self.func.prepared_call(grid, (self.block, 1, 1), *args)
                else:
                    self.func.prepared_async_call(grid, (self.block, 1, 1), self.stream, *args)
            out = None
            if track_dvdt:
                out = (self.cuda.from_device(self._dvdt[0], (self.n_cells,), np.float64),
                       self.cuda.from_device(self._dvdt[1], (self.n_cells,), np.float64))
        finally:
            self._pop()
        if check:
            self.check(t0, dt)
        return out

    def synchronize(self):
        self._push()
        try:
            self.cuda.Context.synchronize()
        finally:
            self._pop()

    def failure_after(self, t0: float, dt: float) -> str | None:
        """:meth:`check`'s message, None where every cell is fine (a backend that records its failure)."""
        try:
            self.check(t0, dt)
        except SimulationError as e:
            return str(e)
        return None

    def check(self, t0: float, dt: float):
        """Raise SimulationError if a cell went bad since the flag was last cleared (t0, dt: of the launch that
        set it, to name the time)."""
        flag = np.zeros(4, dtype=np.int32)
        self._push()
        try:
            if self.stream is None:
                self.cuda.memcpy_dtoh(flag, self.bad)
            else:
                self.cuda.memcpy_dtoh_async(self._flag, self.bad, self.stream)
                self.stream.synchronize()
                flag[:] = self._flag
            if flag[0]:
                self.cuda.memset_d32(self.bad, 0, 4)
        finally:
            self._pop()
        status, c, s, j = (int(v) for v in flag)
        if not status:
            return
        st = self.model.states[s]
        v = self.from_device()[s, c]
        what = "is not finite" if status == 1 else f"is outside its range [{st.lower:g}, {st.upper:g}]"
        # One launch per substep (the seed's variants): the flag cannot tell which launch set it.
        when = (f"t = {t0 + j * dt:.6g} ms" if self.variant.fused else
                f"a time in ({t0:.6g}, {t0 + self._last_k * dt:.6g}] ms")
        raise SimulationError(
            f"{self.model.name}: cell {c}, state {st.name} = {v:.6g} {st.unit} {what} at {when} "
            f"({self.integrator.replace('-', ' ')} on the GPU, dt = {dt:g} ms){STEP_HINT}")

    # -- reporting -----------------------------------------------------------------------------------------------
    def registers(self) -> dict:
        """What ptxas gave the kernel: registers per thread, local memory per thread (spills), constant bytes of the module."""
        f = self.func
        return {"num_regs": f.num_regs, "local_size_bytes": f.local_size_bytes,
                "const_size_bytes": f.const_size_bytes, "shared_size_bytes": f.shared_size_bytes,
                "max_threads_per_block": f.max_threads_per_block}


def first_then_others(comm, start):
    """``start()`` on rank 0 of ``comm`` first, then, once it has succeeded, on the other ranks; returns its result.

    ``comm`` holds the ranks of one node that compile the same GPU kernel: the first compiles it into the cache
    (cardiosim.runtime.compile.compile_cached), the others find it there — one compilation per node, no races. A
    failure on rank 0 is raised on every rank of ``comm`` (they would fail the same way)."""
    def first():
        try:
            return start()
        except Exception as e:
            raise RuntimeError(f"{type(e).__name__}: {e} (raised on the node's first GPU rank)") from None
    result = root_then_all(comm, first, share=False, catch=(RuntimeError,))
    if comm.rank != 0:
        result = start()
    # Every rank must have compiled the same source (as PyOP2 checks): differing configs or kernel files between
    # ranks would otherwise give a run whose ranks integrate different models.
    digests = comm.allgather(getattr(result, "source_digest", None))
    if len(set(digests)) > 1:
        raise RuntimeError(f"the ranks of a node compiled different kernel sources (digests "
                           f"{', '.join(sorted({str(d)[:12] for d in digests}))}); check that every rank reads "
                           f"the same config and kernels/ folder")
    return result
