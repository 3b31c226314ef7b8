"""The conduction system in a run (``[purkinje]``): the network (a file, or grown on the endocardia of the run's
geometry file), refined to the cable's spacing, its cells and cable (cardiosim.purkinje.cable) and the PMJs to the
tissue (cardiosim.purkinje.coupling). Each PDE step starts with the network's, before the tissue's reaction: the
junctions' step, then the cable's reaction and diffusion, with the run's dt, ODE substeps and splitting (the
cable's diffusion by backward Euler whatever simulation.time_scheme). The PMJ current is a source on the tissue
nodes' transmembrane equation (their Vm, as a stimulus is), so it enters the monodomain and the bidomain equations
alike.

The tissue side is each process's nodes: their coordinates (cm), natural indices, the lumped mass (cm^d per node,
the tissue equations' M) and which are outside the tissue. A 1D or 2D tissue has no volume of its own:
``pmj_depth`` (cm, 0: one grid spacing) is its missing extent, a node's volume M·depth^(3 − d), as the pseudo-ECG's
sheet_thickness.

On several ranks the network, its cells, cable and the junctions' system are rank 0's (a network is small: 1e3–1e5
nodes). Every rank keeps the list of its nodes within ``pmj_radius`` of a terminal; each step their Vm go to rank 0
(one Gatherv), the junctions' step runs there over the nodes in natural order (the same system, bit for bit,
whatever the decomposition, on the host) and the new Vm come back (one Scatterv).

Where the tissue's Vm lives on a GPU (cell.placement = "resident") the network's cells are rank 0's on its GPU
(cardiosim.purkinje.cable.DeviceCells, on a stream of their own beside the tissue's kernels); on one rank the
junctions' step is there too (cardiosim.purkinje.device), so that nothing the tissue waits for crosses to the host;
on several, only the junctions' nodes' Vm cross to the host and back, gathered and scattered on the device
(cardiosim.reaction.ode.resident.DeviceEntries). Elsewhere they are read from the Vec's host array
(:class:`HostEntries`) and the network's cells are rank 0's on its CPU. The cable's diffusion (an O(n) tree solve,
cardiosim.purkinje.cable.TreeSolve) is always on the host.

A step (:meth:`System.step`) is :meth:`System.couple`, what the tissue's reaction needs (the junctions, and the
network's cells started), then :meth:`System.advance`, the rest, which the time loop (cardiosim.simulation.loop)
runs while the tissue's reaction kernels run on the device. docs/performance.md gives the network's share of a
step.
"""

from __future__ import annotations

import numpy as np

from cardiosim.purkinje import device as device_junctions, grow, network as networks
from cardiosim.purkinje.cable import Cable, DeviceCells, Stimulus, make_model
from cardiosim.purkinje.coupling import Junctions, tissue_capacitance
from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.runtime.mpi import gather_to_root, root_then_all, scatter_from_root
from cardiosim.reaction.ode.resident import DeviceEntries

# What a checkpoint holds of the network (rank 0's arrays): see System.state
STATE = ("states", "activation", "previous", "charge", "current", "pmj_tissue_activation", "pmj_tissue_previous")


def grow_parameters(tree) -> grow.GrowParameters:
    """purkinje.tree as the generator's parameters."""
    return grow.GrowParameters(segment=tree.segment, his_length=tree.his_length, bundle_length=tree.bundle_length,
                               fascicle_length=tree.fascicle_length, lv_fascicles=tuple(tree.lv_fascicles),
                               rv_fascicles=tuple(tree.rv_fascicles), branch_length=tree.branch_length,
                               branch_angle=tree.branch_angle, length_jitter=tree.length_jitter,
                               angle_jitter=tree.angle_jitter, generations=tree.generations,
                               spacing=tree.spacing, repulsion=tree.repulsion,
                               apex_direction=tuple(tree.apex_direction), seed=tree.seed,
                               block=tuple(tree.block), block_distal=tree.block_distal)


def build_network(p, label_file: str = "") -> networks.Network:
    """The network of ``p`` (the config's purkinje section): its file, or grown on label_file's endocardia."""
    if p.network:
        return networks.read(p.network, root=p.root or None, units=p.units)
    lv, rv, h = grow.geometry_surfaces(label_file, p.tree.apex_direction)
    params = grow_parameters(p.tree)
    root = np.asarray(p.root, float) if p.root else grow.septal_root(lv, rv, params.apex_direction, h=h)
    return grow.conduction_system(lv, rv, root, params)


def near_terminals(points: np.ndarray, terminal_points: np.ndarray, radius: float) -> np.ndarray:
    """The indices of ``points`` (n, 3) cm within ``radius`` cm of any of ``terminal_points``; a hair wider than the
    junctions' own test, which decides (cardiosim.purkinje.coupling.Junctions)."""
    from scipy.spatial import cKDTree
    if not len(points) or not len(terminal_points):
        return np.zeros(0, np.int64)
    d, _ = cKDTree(terminal_points).query(points, distance_upper_bound=radius * (1 + 1e-9))
    return np.flatnonzero(np.isfinite(d))


class HostEntries:
    """The entries ``at`` (local indices) of a Vec whose current values are in its host array."""

    def __init__(self, at: np.ndarray):
        self.at = at

    def read(self, V) -> np.ndarray:
        return V.getArray(readonly=True)[self.at]

    def write(self, V, values: np.ndarray) -> None:
        V.getArray()[self.at] = values


class System:
    """``cfg``: the run's config (its purkinje, simulation, tissue and output sections); ``comm`` the run's mpi4py
    communicator; ``coords`` (n, dim) cm, ``natural`` (n,) natural indices, ``mass`` (n,) cm^d and ``outside``
    ((n,) bool or None): this rank's tissue nodes; ``device``: the GPU whose memory holds the tissue Vec's current
    values (the resident placement), None where its host array does. The network's attributes (net, cable,
    junctions) are rank 0's, None elsewhere."""

    def __init__(self, cfg, comm, coords, natural, mass, outside=None, device: int | None = None):
        p, sim = cfg.purkinje, cfg.simulation
        self.comm, self.root = comm, comm.rank == 0
        self.dt = sim.dt
        self.threshold = cfg.output.activation_threshold
        self.net = self.cable = self.junctions = None
        self.failure: str | None = None      # the network's cells went bad (rank 0): raised by the step's check
        self._before = None                   # (t, the junctions' tissue Vm) at the start of couple()'s step
        terminal_points = root_then_all(comm, lambda: self._network(cfg, device))
        coords = np.asarray(coords, dtype=float)
        dim = coords.shape[1]
        depth = p.pmj_depth or float(min(cfg.grid.spacing))
        volume = np.asarray(mass, dtype=float) * depth ** (3 - dim)                     # cm³
        ok = volume > 0
        if outside is not None:
            ok &= ~np.asarray(outside, bool)
        points = np.pad(coords, ((0, 0), (0, 3 - dim)))
        index = np.flatnonzero(ok)
        self.mine = index[near_terminals(points[index], terminal_points, p.pmj_radius)]   # this rank's, local
        self.entries = HostEntries(self.mine) if device is None else DeviceEntries(self.mine, device)
        self.counts = comm.gather(len(self.mine), root=0)
        found = comm.gather((np.asarray(natural)[self.mine], points[self.mine], volume[self.mine]), root=0)
        root_then_all(comm, lambda: self._junctions(cfg, found))
        self.device_junctions = None           # the junctions' step on the GPU (cardiosim.purkinje.device)
        if (device is not None and comm.size == 1 and isinstance(self.cable.backend, DeviceCells)
                and self.junctions.n <= device_junctions.LIMIT):
            vec_index = self.mine[self.order][self.junctions.tissue_nodes]
            self.device_junctions = device_junctions.DeviceJunctions(self.junctions, vec_index, self.cable.backend,
                                                                     device)

    def _network(self, cfg, device: int | None) -> np.ndarray:
        """Rank 0: the network and its cable; returns the terminals' points (cm)."""
        p, sim = cfg.purkinje, cfg.simulation
        self.net = build_network(p, cfg.tissue.label_file).check().refine(p.spacing)
        model = make_model(p.model or None, None, p.parameters, Cm=p.Cm, chi=p.chi or 2.0 / p.radius)
        s = p.stimulus
        self.cable = Cable(self.net, model, p.sigma, sim.dt, radius=None if self.net.radius is not None else p.radius,
                           chi=p.chi or None, Cm=p.Cm, ode_substeps=sim.ode_substeps, integrator=p.integrator,
                           splitting=sim.splitting, time_scheme="backward-euler",
                           stimulus=Stimulus(s.current_density, s.start, s.duration, s.period, s.count, s.radius),
                           threshold=self.threshold, fibres=p.fibres, device=device)
        self.model_name = model.name or str(p.model)
        return self.net.points[self.net.terminals]

    def _junctions(self, cfg, found) -> None:
        """Rank 0: the PMJs over every rank's nodes near the terminals (``found``: per rank, their natural indices,
        points and volumes), taken in natural order."""
        p, tis = cfg.purkinje, cfg.tissue
        natural = np.concatenate([f[0] for f in found])
        points = np.concatenate([f[1] for f in found]).reshape(-1, 3)
        volume = np.concatenate([f[2] for f in found])
        self.order = np.argsort(natural, kind="stable")        # gathered (by rank) -> natural order
        terminals = self.net.terminals
        self.junctions = Junctions(terminals, self.net.points[terminals], points[self.order], p.pmj_radius,
                                   p.pmj_resistance, self.cable.C[terminals],
                                   tissue_capacitance(volume[self.order], tis.Cm, tis.chi), volume[self.order],
                                   self.dt)
        if self.junctions.n == 0:
            raise UserError(f"purkinje: none of the network's {len(terminals)} terminals has a tissue node within "
                            f"purkinje.pmj_radius = {p.pmj_radius} cm (is the network in the grid's coordinates? "
                            f"grid.origin, purkinje.units)")
        self.tissue_count = len(self.junctions.tissue_nodes)
        self.charge = np.zeros(self.junctions.n)          # µA·ms = nC through each junction, Purkinje -> tissue
        # each junction's tissue side (V̄_m) crossing the activation threshold: the PMJ delays
        self.pmj_tissue_activation = np.full(self.junctions.n, np.nan)
        self.pmj_tissue_previous = np.full(self.junctions.n, np.nan)

    def step(self, t: float, V) -> None:
        """One PDE step from t (collective): the junctions (``V``, the tissue's Vm Vec, changed at the junctions'
        nodes), then the network's cells and diffusion (rank 0). A cell of the network that goes bad is
        :attr:`failure`."""
        self.couple(t, V)
        self.advance()

    def couple(self, t: float, V) -> None:
        """The step's part that the tissue's reaction waits for (collective): the junctions' step, ``V`` changed
        at their nodes; then the network's first reaction started (on a GPU only queued). :meth:`advance` is
        the rest, which touches neither V nor the tissue's cells: the time loop does it while the tissue's
        reaction runs on the device (cardiosim.reaction.Reaction.advance's ``meanwhile``)."""
        if self.device_junctions is not None:
            written = self.device_junctions.exchange(V)
            self._before = (t, None)
            if self.failure is None:
                self._guard(self.cable.start, t, written)
            return
        gathered = gather_to_root(self.comm, self.entries.read(V), self.counts)
        if self.root:
            v = gathered[self.order]
            self._before = (t, v.copy())
            self.junctions.exchange(self.cable.V, v)
            gathered[self.order] = v
        self.entries.write(V, scatter_from_root(self.comm, gathered, self.counts, len(self.mine)))
        if self.root and self.failure is None:
            self._guard(self.cable.start, t)

    def advance(self) -> None:
        """The rest of the step :meth:`couple` began (rank 0; nothing elsewhere): the network's diffusion and
        activation times, and the junctions' tissue side at the step's start."""
        if not self.root:
            return
        t, v = self._before
        if self.device_junctions is not None:
            vbar, self.junctions.current[:] = self.device_junctions.results()
        else:
            vbar = self.junctions.tissue_potential(v)
            self.junctions.currents()
        self._tissue_activation(t, vbar)
        self.charge += self.dt * self.junctions.current
        if self.failure is None:
            self._guard(self.cable.finish)

    def _guard(self, call, *args) -> None:
        try:
            call(*args)
        except SimulationError as e:
            self.failure = str(e)

    def finish(self, t: float, V) -> None:
        """At the end of the run (collective): the junctions' tissue side at t, the last step's end (``V``: the
        tissue's Vm Vec)."""
        gathered = gather_to_root(self.comm, self.entries.read(V), self.counts)
        if self.root:
            self._tissue_activation(t, self.junctions.tissue_potential(gathered[self.order]))

    def _tissue_activation(self, t: float, vbar: np.ndarray) -> None:
        """V̄_m of each junction at t (``vbar``: before the junctions' step, the last step's end), its first upward
        crossing of the threshold since t − dt interpolated linearly (as the tissue's activation map)."""
        v0, thr = self.pmj_tissue_previous, self.threshold
        first = np.isnan(v0)                         # the run's first step: activated already where above
        self.pmj_tissue_activation[first & (vbar >= thr)] = t
        new = ~first & np.isnan(self.pmj_tissue_activation) & (vbar >= thr) & (v0 < thr)
        if new.any():
            self.pmj_tissue_activation[new] = t - self.dt + self.dt * (thr - v0[new]) / (vbar[new] - v0[new])
        self.pmj_tissue_previous[:] = vbar

    def delays(self) -> tuple[np.ndarray, np.ndarray]:
        """(anterograde, retrograde) delay of each PMJ, ms: its tissue side's activation after its terminal's, or
        its terminal's after its tissue side's; NaN where the other way round or either did not activate."""
        d = self.pmj_tissue_activation - self.cable.activation[self.junctions.terminals]
        return np.where(d >= 0, d, np.nan), np.where(d < 0, -d, np.nan)

    def describe(self) -> str:
        """Rank 0's line about the network (empty elsewhere)."""
        if not self.root:
            return ""
        n, j = self.net, self.junctions
        return (f"purkinje: {n.n_nodes} nodes, {n.n_edges} edges ({n.lengths.sum():.3g} cm), {j.n} of "
                f"{len(n.terminals)} terminals coupled (PMJs, R = {np.unique(j.resistance)[0]:g} kOhm) to "
                f"{self.tissue_count} tissue nodes; cells: {self.model_name}")

    def summary(self) -> dict:
        """The run summary's entry, on every rank (collective)."""
        def entry():
            act = self.cable.activation
            ante, retro = self.delays()
            return {"nodes": int(act.size), "pmjs": self.junctions.n, "activated": int(np.isfinite(act).sum()),
                    "last_activation_ms": float(np.nanmax(act)) if np.isfinite(act).any() else None,
                    "anterograde_pmjs": int(np.isfinite(ante).sum()), "retrograde_pmjs": int(np.isfinite(retro).sum())}
        return root_then_all(self.comm, entry)

    def arrays(self) -> dict:
        """What the output keeps (/purkinje): {name: (array, units, description)}; rank 0's (empty elsewhere)."""
        if not self.root:
            return {}
        n, j, c = self.net, self.junctions, self.cable
        coupled = np.zeros(n.n_nodes, np.int8)
        coupled[j.terminals] = 1
        ante, retro = self.delays()
        out = {
            "activation_time": (c.activation, "ms", "first upward crossing of output.activation_threshold at each "
                                                    "node of the network; NaN: not activated"),
            "points": (n.points, "cm", "node positions (x, y, z)"),
            "edges": (n.edges, "1", "node pairs"),
            "pmj": (coupled, "1", "1: a terminal coupled to the tissue (a PMJ)"),
            "distance": (n.distance(), "cm", "path length from the root"),
            "pmj_charge": (self.charge, "nC", "charge through each PMJ (in the order of pmj's nodes), Purkinje to "
                                              "tissue"),
            "pmj_tissue_activation_time": (self.pmj_tissue_activation, "ms", "each PMJ's tissue side (the volume-"
                                           "weighted Vm of its tissue nodes) crossing output.activation_threshold, "
                                           "at the PDE steps' ends (in the order of pmj's nodes); NaN: not activated"),
            "pmj_anterograde_delay": (ante, "ms", "tissue side's activation after the terminal's (in the order of "
                                                  "pmj's nodes); NaN: retrograde, or not activated"),
            "pmj_retrograde_delay": (retro, "ms", "terminal's activation after the tissue side's (in the order of "
                                                  "pmj's nodes); NaN: anterograde, or not activated"),
        }
        if "part" in n.data:
            out["part"] = (n.data["part"], "1", "1 His, 2 LBB, 3 RBB, 4 LV fascicles, 5 RV fascicles, 6 LV tree, "
                                                "7 RV tree (grown networks)")
        return out

    def attrs(self) -> dict:
        if not self.root:
            return {}
        return {"root": int(self.net.root), "cell_model": self.model_name, "dt_ms": self.cable.dt}

    # -- checkpoints ----------------------------------------------------------------------------------------------
    def state(self) -> dict:
        """Rank 0: every array the network carries from one step to the next ({name: copy}, names STATE; the time
        is the run's), so that a restart goes on bit for bit; {} elsewhere."""
        if not self.root:
            return {}
        c = self.cable
        c.backend.download()
        arrays = (c.y, c.activation, c._previous, self.charge, self.junctions.current, self.pmj_tissue_activation,
                  self.pmj_tissue_previous)
        return {name: np.array(a, copy=True) for name, a in zip(STATE, arrays)}

    def load_state(self, state: dict, t: float, where: str = "the checkpoint") -> None:
        """Rank 0: put back what :meth:`state` gave (at the run's time ``t`` ms); UserError (naming ``where``) for
        arrays of another shape, on rank 0 (call it through root_then_all)."""
        if not self.root:
            return
        c = self.cable
        targets = (c.y, c.activation, c._previous, self.charge, self.junctions.current, self.pmj_tissue_activation,
                   self.pmj_tissue_previous)
        for name, target in zip(STATE, targets):
            value = state.get(name)
            if value is None or np.shape(value) != target.shape:
                raise UserError(f"{where}: purkinje/{name} has shape {None if value is None else np.shape(value)}, "
                                f"this run's network needs {target.shape}; the file is damaged or for another "
                                f"network")
            target[...] = value
        c.backend.upload()
        c.t = t
        self.failure = None


__all__ = ["HostEntries", "System", "build_network", "grow_parameters", "near_terminals", "STATE"]
