"""The monodomain cable on a Purkinje network: χ·Cm ∂V/∂t = ∇·(σ∇V) − χ·I_ion along the edges, the cells of a
cell model at the nodes, on the tissue's operator splitting (reaction, then diffusion, per step; or Strang).

Discretisation (finite volumes on the graph; on a straight cable of equal edges this is the tissue's 1D Q1 stiffness
with lumped mass, node for node). Each edge e of length ℓ_e and radius r_e has a cross-section A_e = π r_e² and
conducts g_e = σ A_e / ℓ_e (mS). Each node owns half of each edge it touches: a volume v_i = Σ A_e ℓ_e / 2 (cm³) and
a membrane area a_i = χ v_i (cm²), with χ the cable's surface-to-volume ratio; without one, the cylinder's own,
a_i = Σ 2π r_e ℓ_e / 2 (χ = 2/r). An edge may be a bundle of N parallel fibres (``fibres``): A_e, g_e and a_i
times N, the velocity unchanged, the current the cable can drive N times one fibre's. The node's capacitance is
C_i = Cm a_i (µF). Current conservation at every node,
branch points included (Kirchhoff), is the graph Laplacian L (mS) of the g_e:

    C dV/dt = −L V − a·I_ion − I_source        (I_ion in µA/cm², I_source in µA)

Diffusion by backward Euler, (C/Δt + L) V' = (C/Δt) V, or Crank–Nicolson; the matrix is factorised once: on a tree
(every grown network, most read ones) by Hines's elimination in O(n) with no fill (:class:`TreeSolve`,
kernels/tree_solve.c: SuperLU takes 20–30 times as long on a network of 7,700 nodes), on a network with loops by
scipy's SuperLU. Units: cm, ms, mV, mS/cm, µF/cm², µA (currents between nodes and sources), µA/cm² (membrane current
densities), µA/µF (the cell models' stimulus, negative depolarising).

Reaction: any model cardiosim.cells.make gives, the CellML files included; by default Aslanidi et al. 2009's
Purkinje cell (models/aslanidi_Purkinje_model_2009.cellml). A model with a C kernel (every generated one) is
integrated by the native backend (cardiosim.reaction.ode.native_backend), as cell.backend = "auto" does the
tissue's, or, given a GPU (``device``: the resident placement's), by the fused CUDA kernel (:class:`DeviceCells`);
the others by the NumPy backend. On the CPU a network's cells cost a GPU heart's step several times its tissue's:
the BiV at 0.25 mm with a grown network, 10 ms a step for the network's Aslanidi 2009 cells (native) against 3 for
the tissue's 464,000 on the GPU.
The stimulus (the His bundle's) is a pulse train (cardiosim.cells.stimulus.Protocol) on the nodes within a distance
of the root.
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import numpy as np

from cardiosim import cells
from cardiosim.cells.cellml import MODELS
from cardiosim.cells.stimulus import Protocol, TissueStimuli
from cardiosim.reaction.ode.native_backend import NativeBackend
from cardiosim.reaction.ode.numpy_backend import NumpyBackend
from cardiosim.runtime.compile import c_library
from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.purkinje.network import Network

DEFAULT_MODEL = MODELS / "aslanidi_Purkinje_model_2009.cellml"

# Defaults: a Purkinje fibre's intracellular conductivity (σ = 1/R_i, R_i = 100 Ω·cm) and radius (cm)
SIGMA = 10.0
RADIUS = 0.003


class DeviceCells:
    """The network's cells on a GPU by the CUDA backend's fused kernel: Vm (state 0) crosses to the device before
    the substeps and back after (the cable's diffusion and the junctions are on the host), the other states stay
    there; :meth:`download` / :meth:`upload` bring ``y`` up to date / to the device (checkpoints).

    :meth:`launch` queues Vm's copy, the substeps and Vm's copy back on a stream of their own, :meth:`receive`
    waits for that copy and :meth:`check` reads the error flag: the network's kernel runs beside the tissue's,
    and the cable's diffusion on the host between the last two (cardiosim.purkinje.system)."""

    name = "cuda"

    def __init__(self, model, states: np.ndarray, stimuli, integrator: str, device: int):
        from cardiosim.reaction.ode.cuda_backend import CudaBackend     # lazy: PyCUDA only where a GPU runs it
        self.y = states
        self.gpu = CudaBackend(model, states, device=device, integrator=integrator)
        self.stimulus = self.gpu.stimulus(stimuli.protocols, stimuli.amplitudes)
        self.gpu.use_own_stream()
        with self.gpu.ctx as cuda:
            self.vm_in = cuda.pagelocked_empty(states.shape[1], np.float64)
            self.vm = cuda.pagelocked_empty(states.shape[1], np.float64)
        self.failure: str | None = None
        self._launched = self._copied = None

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        self.launch(t0, dt, k)
        self.receive()
        self.check()

    def launch(self, t0: float, dt: float, k: int, after=None) -> None:
        """``after``: the event after which the device's Vm row is current (the junctions' step on the device,
        cardiosim.purkinje.device); without one, Vm goes from ``y[0]``."""
        if self.failure:
            return
        if after is None:
            self.vm_in[:] = self.y[0]
            self.gpu.set_row_queued(0, self.vm_in)
        else:
            self.gpu.stream.wait_for_event(after)
        self.gpu.advance(t0, dt, k, self.stimulus, check_range=True, check=False)
        self._copied = self.gpu.get_row_queued(0, self.vm)
        self._launched = (t0, dt)

    def receive(self) -> None:
        """Vm of the launch in ``y[0]``."""
        if self._copied is not None:
            self._copied.synchronize()
            self.y[0] = self.vm
            self._copied = None

    def check(self) -> None:
        """The launch's error flag (a synchronisation with everything queued since): a bad cell is :attr:`failure`."""
        if self._launched is not None:
            self.failure = self.gpu.failure_after(*self._launched)
            self._launched = None

    def download(self) -> None:
        """The states but Vm from the device (Vm: the host's, which the diffusion has moved on since)."""
        self.gpu.synchronize()
        self.y[1:] = self.gpu.from_device()[1:]

    def upload(self) -> None:
        self.gpu.synchronize()
        self.gpu.to_device(self.y)
        self.gpu.synchronize()           # by the default stream: done before the next launch on ours


class TreeSolve:
    """(diag(d) − θ·A_g) x = b for the Laplacian-type matrix of a tree ``network`` (or a forest: a network with
    detached pieces): ``d`` (n,) its diagonal, ``a`` (m,) its off-diagonal entry per edge (−θ g_e). The nodes are
    renumbered breadth-first from the root (each further piece from its first node), so that each node's parent
    comes first (kernels/tree_solve.c), and the pivots are computed once."""

    _lib: list = []

    def __init__(self, network: Network, d: np.ndarray, a: np.ndarray):
        from scipy.sparse import csgraph
        adj = network.adjacency()
        _, piece = csgraph.connected_components(adj, directed=False)
        firsts = [network.root] + [int(np.argmax(piece == p)) for p in np.unique(piece) if p != piece[network.root]]
        orders, pred = [], np.full(network.n_nodes, -9999, np.int64)
        for first in firsts:
            o, pr = csgraph.breadth_first_order(adj, first, directed=False)
            orders.append(o)
            pred[o] = pr[o]
        order = np.concatenate(orders)
        self.order = order.astype(np.int64)
        pos = np.empty_like(self.order)
        pos[self.order] = np.arange(len(order))
        i, j = network.edges[:, 0], network.edges[:, 1]
        child = np.where(pred[j] == i, j, i)          # each edge's node further from the root
        self.parent = np.full(len(order), -1, np.int64)
        self.parent[pos[child]] = pos[pred[child]]
        self.a = np.zeros(len(order))
        self.a[pos[child]] = a
        self.d = np.ascontiguousarray(np.asarray(d, float)[self.order])
        self.work = np.empty(len(order))
        self.lib = self.library()
        self.lib.cs_tree_factor(len(order), self.parent.ctypes.data, self.a.ctypes.data, self.d.ctypes.data)

    @classmethod
    def library(cls):
        if not cls._lib:
            lib = c_library("tree_solve.c", "purkinje cable")
            p, n = ctypes.c_void_p, ctypes.c_long
            lib.cs_tree_factor.argtypes, lib.cs_tree_factor.restype = [n, p, p, p], None
            lib.cs_tree_solve.argtypes, lib.cs_tree_solve.restype = [n, p, p, p, p], None
            cls._lib.append(lib)
        return cls._lib[0]

    def solve(self, b: np.ndarray) -> np.ndarray:
        w = self.work
        np.take(b, self.order, out=w)
        self.lib.cs_tree_solve(len(w), self.parent.ctypes.data, self.a.ctypes.data, self.d.ctypes.data,
                               w.ctypes.data)
        x = np.empty_like(w)
        x[self.order] = w
        return x


@dataclass(frozen=True)
class Stimulus:
    """A pulse train on the nodes within ``radius`` (cm) of the root: ``current_density`` µA/cm² of membrane
    (negative depolarises), ``start``, ``duration``, ``period`` ms, ``count`` pulses (0: unlimited)."""
    current_density: float = -100.0
    start: float = 0.0
    duration: float = 2.0
    period: float = 0.0
    count: int = 1
    radius: float = 0.05


class Cable:
    """The cable of ``network`` with cells of ``model`` (a CellModel). ``sigma`` mS/cm; ``radius`` cm (scalar or per
    edge; default the network's, else RADIUS); ``chi`` cm⁻¹ (None: the cylinder's surface); ``Cm`` µF/cm²; ``dt`` the
    step (ms) with ``ode_substeps`` reaction substeps; ``integrator`` as cell.integrator; ``splitting`` "godunov" or
    "strang"; ``time_scheme`` "backward-euler" or "crank-nicolson"; ``threshold`` (mV) of the activation times;
    ``fibres``: each edge a bundle of this many parallel fibres (membrane and conductance times it, the velocity
    the same: the current a terminal can give the tissue grows with it)."""

    def __init__(self, network: Network, model, sigma: float = SIGMA, dt: float = 0.01, *, radius=None,
                 chi: float | None = None, Cm: float = 1.0, ode_substeps: int = 1,
                 integrator: str = "forward-euler", splitting: str = "godunov",
                 time_scheme: str = "backward-euler", stimulus: Stimulus | None = None, threshold: float = 0.0,
                 initial: dict | None = None, fibres: float = 1.0, device: int | None = None):
        from scipy import sparse
        from scipy.sparse.linalg import splu
        self.net = network.check()
        self.model = model
        if (not sigma > 0 or not dt > 0 or not Cm > 0 or ode_substeps < 1 or (chi is not None and not chi > 0)
                or not fibres > 0):
            raise UserError("purkinje cable: sigma, dt, Cm, fibres (and chi) must be > 0 and ode_substeps >= 1")
        if splitting not in ("godunov", "strang") or time_scheme not in ("backward-euler", "crank-nicolson"):
            raise UserError(f"purkinje cable: splitting '{splitting}' / time_scheme '{time_scheme}' unknown")
        self.sigma, self.dt, self.Cm, self.chi, self.k = float(sigma), float(dt), float(Cm), chi, int(ode_substeps)
        self.splitting = splitting
        self.theta = 1.0 if time_scheme == "backward-euler" else 0.5
        n = network.n_nodes
        r = radius if radius is not None else (network.radius if network.radius is not None else RADIUS)
        self.radius = np.broadcast_to(np.asarray(r, dtype=float), (network.n_edges,)).copy()
        if not np.all(self.radius > 0):
            raise UserError("purkinje cable: every radius must be > 0 cm")
        length = network.lengths
        self.fibres = float(fibres)
        section = self.fibres * math.pi * self.radius ** 2
        i, j = network.edges[:, 0], network.edges[:, 1]
        self.volume = np.bincount(np.r_[i, j], np.r_[section * length, section * length] / 2, n)     # cm³
        if chi is None:
            lateral = self.fibres * 2 * math.pi * self.radius * length / 2
            self.area = np.bincount(np.r_[i, j], np.r_[lateral, lateral], n)                          # cm²
        else:
            self.area = chi * self.volume
        self.C = self.Cm * self.area                                                                     # µF
        g = self.sigma * section / length                                                                # mS
        adj = sparse.coo_matrix((np.r_[g, g], (np.r_[i, j], np.r_[j, i])), shape=(n, n)).tocsr()
        self.L = (sparse.diags(np.asarray(adj.sum(axis=1)).ravel()) - adj).tocsr()
        lhs = (sparse.diags(self.C / self.dt) + self.theta * self.L).tocsc()
        if network.is_forest():
            self._lhs = TreeSolve(network, lhs.diagonal(), -self.theta * g)
        else:
            self._lhs = splu(lhs, permc_spec="MMD_AT_PLUS_A")
        # the cells
        self.y = model.initial_state(n, network.points)
        for name, value in (initial or {}).items():
            self.y[model.state_index(name)] = value
        self.stimulus = stimulus
        amps = np.zeros((0, n))
        protocols = []
        if stimulus is not None:
            near = np.linalg.norm(network.points - network.points[network.root], axis=1) <= stimulus.radius
            near[network.root] = True
            amps = np.where(near, stimulus.current_density / self.Cm, 0.0)[None, :]        # µA/µF
            protocols = [Protocol(stimulus.start, stimulus.duration, stimulus.period, stimulus.count)]
        self.stimuli = TissueStimuli(protocols, amps, ["purkinje.stimulus"][:len(protocols)],
                                     amps != 0 if len(protocols) else None)
        if not getattr(model, "kernel_name", None):
            self.backend = NumpyBackend(model, self.y, network.points, integrator)
        elif device is None:
            self.backend = NativeBackend(model, self.y, self.stimuli, integrator)
        else:
            self.backend = DeviceCells(model, self.y, self.stimuli, integrator, device)
        self.t = 0.0
        self._t0 = 0.0                        # the time of the step start() began
        self.threshold = float(threshold)
        self.activation = np.where(self.V >= threshold, 0.0, np.nan)
        self._previous = self.V.copy()        # V at the last step's end

    @property
    def V(self) -> np.ndarray:
        """Vm (mV) at every node (the cells' state 0)."""
        return self.y[0]

    @property
    def n_nodes(self) -> int:
        return self.net.n_nodes

    # -- the split steps ------------------------------------------------------------------------------------------
    def react(self, t: float, dt: float, k: int) -> None:
        """k substeps of dt / k of every cell from t (stimulus included)."""
        self.backend.advance(t, dt / k, k, self.stimuli)
        self._raise_failure()

    def _raise_failure(self) -> None:
        if self.backend.failure:
            raise SimulationError(f"purkinje network: {self.backend.failure}")

    def diffuse(self) -> None:
        """One implicit diffusion step of dt along the edges."""
        v = self.V
        rhs = self.C / self.dt * v
        if self.theta != 1.0:
            rhs -= (1 - self.theta) * (self.L @ v)
        v[:] = self._lhs.solve(rhs)

    def inject(self, current: np.ndarray, dt: float | None = None) -> None:
        """A source of ``current`` µA into each node (positive depolarises) over dt: V += dt·I/C."""
        self.V[:] += (self.dt if dt is None else dt) * np.asarray(current) / self.C

    def step(self, t: float | None = None) -> None:
        """One step of dt from t (default: the cable's own time): reaction then diffusion (Godunov), or half the
        reaction, diffusion, half the reaction (Strang); then the activation times."""
        self.start(t)
        self.finish()

    def start(self, t: float | None = None, after=None) -> None:
        """The step's first reaction: on a GPU (:class:`DeviceCells`) only queued (once ``after``, an event, has
        happened), :meth:`finish` does the rest."""
        t = self.t if t is None else t
        self._t0 = t
        dt, k = (self.dt / 2, math.ceil(self.k / 2)) if self.splitting == "strang" else (self.dt, self.k)
        if isinstance(self.backend, DeviceCells):
            self.backend.launch(t, dt / k, k, after)
        else:
            self.react(t, dt, k)

    def finish(self) -> None:
        """The rest of the step :meth:`start` began: its diffusion (and Strang's second half of the reaction), the
        activation times, and the cells' error check."""
        t = self._t0
        cells = self.backend if isinstance(self.backend, DeviceCells) else None
        if cells is not None:
            cells.receive()
            if self.splitting == "strang":         # the second half's flag must not hide the first's
                cells.check()
                self._raise_failure()
        self.diffuse()
        if self.splitting == "strang":
            self.react(t + self.dt / 2, self.dt / 2, math.ceil(self.k / 2))
        self.t = t + self.dt
        self._activation(t)
        if cells is not None:
            cells.check()
            self._raise_failure()

    def _activation(self, t0: float) -> None:
        """The first upward crossing of the threshold since the last step's end (what came in between, the PMJs'
        currents, included), linearly interpolated within the step (as the tissue's activation map,
        cardiosim.analysis.maps.ActivationMap)."""
        thr, v, v0 = self.threshold, self.V, self._previous
        new = np.isnan(self.activation) & (v >= thr) & (v0 < thr)
        if new.any():
            self.activation[new] = t0 + self.dt * (thr - v0[new]) / (v[new] - v0[new])
        v0[:] = v

    def run(self, duration: float, on_step=None) -> None:
        """Steps of dt until ``duration`` ms more have passed; ``on_step(cable)`` after each."""
        steps = round(duration / self.dt)
        if abs(steps * self.dt - duration) > 1e-9 * max(duration, 1.0):
            raise UserError(f"purkinje cable: {duration} ms is not a whole number of steps of {self.dt} ms")
        start = round(self.t / self.dt)
        for s in range(start, start + steps):
            self.step(s * self.dt)        # t from the step count: no accumulated round-off
            if on_step:
                on_step(self)


def make_model(name=None, variant=None, parameters=None, Cm: float = 1.0, chi: float = 1400.0):
    """A cell model by name (cardiosim.cells.make: a built-in name or a CellML file), the Purkinje default where
    ``name`` is None."""
    return cells.make(str(name or DEFAULT_MODEL), variant or None, parameters or {}, tissue={"Cm": Cm, "chi": chi})


def conduction_velocity(cable: Cable, a: int, b: int) -> float:
    """(distance along the network from node a to b) / (their activation times' difference): cm/ms."""
    d = cable.net.distance()
    return float(abs(d[b] - d[a]) / (cable.activation[b] - cable.activation[a]))


def straight(length: float, spacing: float, direction=(1.0, 0.0, 0.0), start=(0.0, 0.0, 0.0)) -> Network:
    """A straight cable of ``length`` cm from ``start``, nodes ``spacing`` apart (rounded to a whole number of edges),
    its root at the start."""
    n = max(1, round(length / spacing))
    d = np.asarray(direction, float) / np.linalg.norm(direction)
    pts = np.asarray(start, float) + np.linspace(0.0, length, n + 1)[:, None] * d
    return Network(pts, np.stack([np.arange(n), np.arange(1, n + 1)], axis=1), 0, name="straight cable")


__all__ = ["Cable", "Stimulus", "make_model", "conduction_velocity", "straight", "DEFAULT_MODEL", "SIGMA",
           "RADIUS"]
