"""The time loop: operator splitting of the reaction and the tissue equations.

One PDE step of Δt (Godunov):
    1. reaction    every cell integrates its model over Δt in k substeps of cell.integrator (stimulus included)
    2. parabolic   implicit diffusion of Vm, φe from the last step (bidomain), or σm (monodomain)
    3. elliptic    φe from the new Vm (bidomain)
Strang splitting does half the reaction before and half after steps 2-3.
"""

from __future__ import annotations

import json
import math
import socket
import time
from pathlib import Path

import numpy as np

from cardiosim.output import checkpoint, writer as output
from cardiosim.runtime import energy, log, petsc as petsc_options
from cardiosim.analysis.maps import ActivationMap, APDMap, HostMaps
from cardiosim.analysis.ecg import PseudoEcg
from cardiosim.analysis.device import DeviceAccumulator, DeviceMaps, DeviceProbes
from cardiosim.cells import model_class
from cardiosim.runtime.errors import SimulationError, UserError
from cardiosim.runtime.mpi import root_then_all
from cardiosim.domain.grid import Grid
from cardiosim.purkinje.system import System as ConductionSystem
from cardiosim.reaction.placement import MODE
from cardiosim.reaction import Reaction
from cardiosim.runtime.resources import check_memory
from cardiosim.tissue import make as make_tissue, microscopic
from cardiosim.tissue.equations import balance_levels
from cardiosim.runtime.timing import Timers, table
from cardiosim.analysis import checks


def choose_stencil(cfg, grid, want: str | None = None) -> str:
    """The stencil of the tissue operators: grid.stencil (or ``want``), "auto" resolved to "box" where the fibres
    leave the axes (cross terms) and "star" where they do not; the microscopic model's per-face star is "faces"."""
    if cfg.tissue.model == "microscopic":
        return "faces"   # the microscopic model's per-face 3/5/7-point star (cardiosim.tissue.microscopic)
    want = want or cfg.grid.stencil
    cross = grid.has_cross_terms(grid.fibres(cfg.tissue, grid.owned))
    if want == "star" and cross:
        raise UserError("grid.stencil: 'star' cannot represent fibres that are not along an axis; "
                        "use 'box' or 'auto'")
    if want == "auto":
        return "box" if cross else "star"
    return want


class Simulation:
    def __init__(self, cfg, comm=None, output_path: Path | None = None, overwrite: bool = False,
                 write_output: bool = True, restart: Path | None = None):
        """``restart``: a checkpoint to go on from (docs/user/checkpoints.md); the output file is continued."""
        from petsc4py import PETSc
        self.comm = comm or PETSc.COMM_WORLD.tompi4py()
        self.cfg = cfg
        self.timers = Timers(petsc_events=True)
        self.events = self.timers.events
        sim = cfg.simulation
        self.dt = sim.dt
        self.n_steps = sim.n_steps
        if abs(self.n_steps * sim.dt - sim.duration) > 1e-9 * sim.duration:
            raise UserError(f"simulation.duration: {sim.duration} ms is not a whole number of steps of "
                            f"simulation.dt = {sim.dt} ms")
        self.path = output_path or output.resolve_path(cfg)
        # Checkpoints go with the output file, whose position they record; a run without output has none.
        self.checkpoint_path = checkpoint.resolve_path(cfg, self.path) if write_output else None
        ckpt = checkpoint.Checkpoint.open(restart, cfg, self.n_steps, self.comm) if restart else None
        # Rank 0 holds the output's lock from here to the end of the run (release_output).
        self.lock = None
        if write_output:
            self.lock = root_then_all(self.comm, lambda: output.claim(cfg, self.path, self.checkpoint_path, overwrite,
                                                                      ckpt.output if ckpt else None), share=False)
        # before PETSc allocates: a grid that cannot fit is one line, not an OOM
        check_memory(cfg, self.comm, len(model_class(cfg.cell.model).states))

        # where the set-up's time goes (the summary's setup_phases_s; rank 0's clock)
        self.setup_phases: dict[str, float] = {}
        lap_start = [time.perf_counter()]

        def lap(name):
            now = time.perf_counter()
            self.setup_phases[name] = self.setup_phases.get(name, 0.0) + now - lap_start[0]
            lap_start[0] = now

        # GPU vector and matrix types for the resident placement
        self.grid = Grid(cfg, PETSc.Comm(self.comm), balance_levels)
        self.stencil = choose_stencil(self.cfg, self.grid)
        if self.grid.mask is not None:
            log.info(f"tissue ({self.cfg.tissue.label_file}): {self.grid.mask.describe()}"
                     + (f"; {self.grid.describe_balance()}" if self.comm.size > 1 else ""))
        lap("grid")
        self.tissue = make_tissue(self.grid, cfg, self.stencil)
        # the pseudo-ECG's electrodes are checked (outside the tissue) before any file is written
        self.ecg = PseudoEcg(cfg, self.grid, self.tissue.intracellular()) if cfg.ecg.electrodes else None
        lap("tissue: matrices and solvers")
        self.reaction = Reaction(cfg, self.grid, self.comm, self.timers)
        lap("cells: states, stimuli, kernels")
        self.energy = energy.for_run(self.comm, getattr(self.reaction.backend, "device", None))
        self.energy_marks = [self.energy.read()]     # set-up (from here), loop start, end: joules
        for name in [*self.reaction.stimuli.empty_regions(self.comm), *_empty_cell_regions(cfg, self.grid, self.comm)]:
            where = "tissue node (tissue.label_file)" if self.grid.mask is not None else "grid node"
            raise UserError(f"{name}: its region contains no {where}; enlarge it or refine grid.spacing")
        self.V = self.grid.vec()
        self.V.getArray()[:] = self.reaction.vm
        self.purkinje = self._conduction_system()      # None without [purkinje]
        self.phi = self.grid.vec()
        self.t = 0.0
        self.step_index = 0
        self.activation = ActivationMap(self.V.getArray(), cfg.output.activation_threshold)
        self.apd = APDMap(self.activation, self.V.getArray(), cfg.output.apd_level)
        self.mode = MODE[self.reaction.placement.mode]
        # what checkpoints save through state()/load_state()
        if self.mode.on_device:
            self.maps = DeviceMaps(self.activation, self.apd, self.reaction.placement.device)
            self.accumulators = {"activation": DeviceAccumulator(self.maps, self.activation),
                                 "apd": DeviceAccumulator(self.maps, self.apd)}
        else:
            self.maps = HostMaps(self.activation, self.apd)
            self.accumulators = {"activation": self.activation, "apd": self.apd}
        self.layout = {"mpi_ranks": self.comm.size, "dmda_procs": list(self.grid.da.getProcSizes()),
                       "hosts": self.comm.allgather(socket.gethostname()),
                       "gpus": self.comm.allgather(getattr(self.reaction.backend, "device", None)),
                       **self.reaction.placement.layout}
        if self.grid.mask is not None:       # the decomposition of a masked grid (grid.balance)
            self.layout.update(balance=self.grid.balance, tissue_per_rank=self.grid.tissue_per_rank())
        # Everything that reads PETSc options is set up: an option from the command line that nothing read is a
        # mistake (a misspelt name or prefix), said before any file is written.
        petsc_options.check_unused(("dm_", *(s.name + "_" for s in self.tissue.solvers())))
        self.start_step = 0
        self.last_checkpoint = None   # (path, t) of the newest checkpoint, named when a run fails
        if ckpt:
            self._restore(ckpt)
        elif write_output and self.comm.rank == 0:
            self.checkpoint_path.unlink(missing_ok=True)   # an earlier run's, replaced by --overwrite
        self.state_vecs = self._state_vecs()
        self._states_filled_at = None             # the step whose cell states the state Vecs hold (vecs())
        self.output = (output.Output(cfg, self.grid, self.path, self.stencil, self.layout, self.comm,
                                     resume=ckpt.output if ckpt else None,
                                     units=self._state_units(), models=self._state_models())
                       if write_output else None)
        if self.output and not ckpt and cfg.tissue.model == "microscopic":
            self.output.write_tissue(lambda: microscopic.global_layout(cfg, self.grid), microscopic.output_attrs(cfg))
        if self.output:
            self.output.probes.ecg = self.ecg
        if self.output and self.mode.on_device:
            self.output.probes = DeviceProbes(self.output.probes, self.reaction.placement.device)
        lap("maps, output, restart")
        # Solver set-up that PETSc would otherwise do in the first solves (hierarchy, eigenvalue estimates, GPU
        # transposes), here, so that the set-up is timed apart and the stepping loop copies nothing.
        self.tissue.warm_up()
        if self.grid.gpu:
            for v in (self.V, self.phi, *self.tissue.vecs()):
                self.grid.to_device(v)
        lap("solvers' warm-up")
        self.schedule = None
        self.snapshots = [0, 0.0]        # snapshots written by this run, and their wall time (s; inside "io")
        self.requests = 0
        self.stopped = False
        self.setup_time = self.timers.elapsed()
        self.energy_marks.append(self.energy.read())

    def _conduction_system(self):
        """[purkinje]: the Purkinje network and its PMJs (cardiosim/purkinje/system.py), the network on rank 0 (its
        cells on that rank's GPU in the resident placement, on its CPU otherwise), the tissue's Vm at the PMJs from
        every rank's Vec; None without the section."""
        cfg = self.cfg
        if not cfg.purkinje.enabled:
            return None
        outside = self.grid.mask.outside() if self.grid.mask is not None else None
        on_device = MODE[self.reaction.placement.mode].on_device
        system = ConductionSystem(cfg, self.comm, self.grid.coords(), self.grid.natural_index(),
                                  self.tissue.M.getArray(readonly=True), outside,
                                  self.reaction.placement.device if on_device else None)
        log.info(system.describe())
        return system

    def _restore(self, ckpt) -> None:
        """Every piece of state from a checkpoint (collective); the arrays are read before the output is touched,
        so a damaged checkpoint changes nothing."""
        gather, v = output.Gatherer(self.grid), self.grid.vec()
        self.V.getArray()[:] = ckpt.read("fields/Vm", gather, v)
        self.phi.getArray()[:] = ckpt.read("fields/phi_e", gather, v)
        self.reaction.load_states([ckpt.read(name, gather, v) for name in checkpoint.state_datasets(self.cfg)])
        for name, acc in self.accumulators.items():
            acc.load_state(ckpt.accumulator(name, gather, v))
        for s in self.tissue.solvers():
            s.iterations[:] = ckpt.iterations.get(s.name, [])
        v.destroy()
        t = ckpt.step * self.dt
        if self.purkinje is not None:
            root_then_all(self.comm, lambda: self.purkinje.load_state(ckpt.purkinje(), t, f"--restart {ckpt.path}"),
                          share=False)
        ckpt.close()
        self.step_index = self.start_step = ckpt.step
        self.t = t
        self.last_checkpoint = (ckpt.path, self.t)

    # -- the numerical method ----------------------------------------------------------------------------------
    def step(self) -> bool:
        """One PDE step; False if a stop request (a signal) came in the middle of a long reaction: the run is then
        back where the step began, ready for a checkpoint."""
        t, dt, k = self.t, self.dt, self.cfg.simulation.ode_substeps
        strang = self.cfg.simulation.splitting == "strang"
        chunked = self.schedule is not None and k > REACTION_CHUNK
        start = self._state_copy() if chunked else None
        try:
            network = None
            if self.purkinje is not None:      # the PMJs; the network's cells and cable while the tissue's react
                with self.timers("purkinje"):
                    self.purkinje.couple(t, self.V)
                network = self._network_rest
            with self.timers("reaction"):
                if strang:
                    half_k = math.ceil(k / 2)
                    self._react(t, dt / 2, half_k, chunked, network)
                else:
                    self._react(t, dt, k, chunked, network)
            try:
                with self.timers("parabolic"):
                    self.tissue.diffuse(self.V, self.phi, t + dt)
                with self.timers("elliptic"):
                    self.tissue.solve_phi(self.V, self.phi, t + dt)
            except Exception as e:
                # A cell that went bad (NaN in Vm) makes the solvers fail in the same step: name the cell, not the
                # solver. A SimulationError of a solver is raised on every rank (it follows a collective
                # convergence test), so the check's collective is safe then; on one rank always.
                if isinstance(e, SimulationError) or self.comm.size == 1:
                    self.reaction.check(t + dt)
                raise
            if strang:
                with self.timers("reaction"):
                    self._react(t + dt / 2, dt / 2, half_k, chunked)
        except _StopMidStep:
            self._restore_copy(start)
            self.requests = checkpoint.Schedule.STOP
            return False
        self._step_end(t, dt)
        return True

    def _react(self, t: float, dt: float, k: int, chunked: bool, meanwhile=None) -> None:
        """k substeps over dt; ``meanwhile()`` done while they run (cardiosim.reaction.Reaction.advance), or after
        them. Many substeps go in chunks, between which the ranks agree on a stop request: a signal must not wait
        for a PDE step of unbounded length (ode_substeps huge)."""
        if not chunked:
            self.reaction.advance(self.V, t, dt, k, meanwhile)
            return
        if meanwhile is not None:
            meanwhile()
        from mpi4py import MPI
        dto, done = dt / k, 0
        while done < k:
            n = min(REACTION_CHUNK, k - done)
            self.reaction.advance(self.V, t + done * dto, n * dto, n)
            done += n
            if done < k and self.comm.allreduce(int(self.schedule.signalled), op=MPI.BOR):
                raise _StopMidStep

    def _network_rest(self) -> None:
        """The Purkinje network's step after its junctions' (cardiosim.purkinje.system.System.advance)."""
        with self.timers("purkinje"):
            self.purkinje.advance()

    def _state_copy(self):
        """What a step changes, so that an interrupted one can be undone (only with chunked reactions)."""
        return (self.V.getArray(readonly=True).copy(), self.phi.getArray(readonly=True).copy(),
                [a.copy() for a in self.reaction.host_states()],
                {s.name: len(s.iterations) for s in self.tissue.solvers()},
                self.purkinje.state() if self.purkinje is not None else None)

    def _restore_copy(self, start) -> None:
        V, phi, states, n_its, network = start
        self.V.getArray()[:] = V
        self.phi.getArray()[:] = phi
        self.reaction.load_states(states)
        if network is not None:
            self.purkinje.load_state(network, self.t)
        for s in self.tissue.solvers():
            del s.iterations[n_its[s.name]:]

    def _step_end(self, t: float, dt: float) -> None:
        self.step_index += 1
        self.t = self.step_index * dt  # no accumulated round-off in t
        with self.timers("reaction"):
            # The step's one collective: a bad cell anywhere stops every rank; checkpoint requests ride along.
            self.requests = self.reaction.check(self.t, self.schedule.requests() if self.schedule else 0,
                                                self.purkinje.failure if self.purkinje is not None else None)
        with self.timers("io"):
            self.maps.update(t, self.t, self.V)

    def vecs(self) -> dict:
        """The fields the output records: Vm, φe and the cell states of output.states (copied from the cells'
        host array: the CPU placement's states are current there)."""
        if not self.state_vecs:
            return {"Vm": self.V, "phi_e": self.phi}
        if self._states_filled_at == self.step_index:     # a step's probes and snapshot: filled once
            return {"Vm": self.V, "phi_e": self.phi, **{n: v for n, (_, v) in self.state_vecs.items()}}
        self._states_filled_at = self.step_index
        states = self.reaction.host_states()      # a copy per piece only where the cells are in pieces
        derived = [n for n, (i, _) in self.state_vecs.items() if i is None]
        values = {}
        if derived:              # at the Vm recorded beside them (the cells' own copy is from before the PDE step)
            current = [a.copy() for a in states]
            for a in current:
                a[0] = self.V.getArray(readonly=True)
            values = self.reaction.intermediates(derived, current)
        per_model = self.reaction.model_cells
        for n, (i, v) in self.state_vecs.items():
            if i is None:
                v.getArray()[:] = values[n]
            elif len(per_model) == 1:
                v.getArray()[:] = states[0][i]
            else:                # several models: each model's row at its own cells, NaN where none has it
                out = v.getArray()
                out[:] = np.nan
                for mc, row in zip(per_model, i):
                    if row is not None:
                        out[mc.owns] = mc.states[row][mc.owns]
        return {"Vm": self.V, "phi_e": self.phi, **{n: v for n, (_, v) in self.state_vecs.items()}}

    def _state_units(self) -> dict:
        units = {}
        for mc in reversed(self.reaction.model_cells):     # the config checked that every model gives one unit
            inter = mc.model.intermediate_units() if hasattr(mc.model, "intermediate_units") else {}
            units.update({st.name: st.unit for st in mc.model.states}, **inter)
        return {n: units.get(n, "") for n in self.state_vecs}

    def _state_models(self) -> dict:
        """{name: the models (config names) whose cells it is recorded at} for output.states, where the run has
        several (the output says whose; a one-model run's are all cell.model's)."""
        out = {}
        if len(self.reaction.model_cells) == 1:
            return out
        for mc in self.reaction.model_cells:
            inter = mc.model.intermediate_units() if hasattr(mc.model, "intermediate_units") else {}
            for n in self.state_vecs:
                if n in inter or any(st.name == n for st in mc.model.states):
                    out.setdefault(n, []).append(mc.name)
        return out

    def _state_vecs(self) -> dict:
        """{name: (its row in the cells' array, or None for an intermediate, a Vec)} for output.states; only where this
        rank's states are on its host and current every step (cell.placement = cpu): grouped placements keep them
        with the group's owner, GPU ones on the device."""
        names = self.cfg.output.states
        if names and self.reaction.placement.mode != "cpu":
            raise UserError(f"output.states: needs cell.placement = 'cpu' (this run's is "
                            f"'{self.reaction.placement.mode}', whose cell states are not on each rank's host every "
                            f"step); record states on the CPU, or leave output.states out")
        per_model = self.reaction.model_cells
        index = [{st.name: i for i, st in enumerate(mc.model.states)} for mc in per_model]
        if len(per_model) == 1:
            return {n: (index[0].get(n), self.grid.vec()) for n in names}    # None: an intermediate, computed
        # several models: a state's row in each model's cells (None where that model lacks it); an intermediate: None
        return {n: (None if not any(n in ix for ix in index) else tuple(ix.get(n) for ix in index), self.grid.vec())
                for n in names}

    def run(self, on_step=None) -> dict:
        """Run to the end: progress on rank 0, snapshots, probes; returns the summary (also written as JSON)."""
        cfg = self.cfg
        interval = output.snapshot_every(cfg)
        self._announce()
        out = self.output
        if self.last_checkpoint is None:   # a restarted run has all this from its checkpoint (even at step 0)
            with self.timers("elliptic"):
                self.tissue.solve_phi(self.V, self.phi, 0.0)   # φe consistent with the initial Vm
            with self.timers("io"):
                if out:
                    out.probes.record(0.0, self.vecs())
                    self._snapshot(0.0)
        progress = Progress(self.n_steps, self.dt, cfg.simulation.progress_interval, self.comm, self.step_index)
        if out:
            self.schedule = checkpoint.Schedule(cfg, self.dt, self.comm)
        try:
            while self.step_index < self.n_steps:
                # PETSc's log (-log_view): the steps in a stage of their own, each in the event "cardiosim:step"
                # (what the resident placement must do without a host copy), snapshots and checkpoints outside.
                with self.events.steps():
                    finished = self.step()
                    if finished and out:
                        with self.timers("io"):
                            out.probes.record(self.t, self.vecs())
                if not finished:       # a signal in the middle of a long step: its start is checkpointed
                    with self.timers("io"):
                        self.write_checkpoint()
                    self.stopped = True
                    break
                if on_step:
                    on_step(self)
                with self.timers("io"):
                    if out:
                        if self.step_index % interval == 0 or self.step_index == self.n_steps:
                            self._snapshot(self.t)
                progress.update(self.step_index, self.tissue.iterations())
                if out and self.step_index < self.n_steps and self.schedule.due(self.step_index, self.requests):
                    with self.timers("io"):
                        self.write_checkpoint()
                    if self.requests & checkpoint.Schedule.STOP:
                        self.stopped = True
                        break
        except SimulationError as e:
            if self.last_checkpoint:
                path, t = self.last_checkpoint
                raise SimulationError(f"{e}; the last checkpoint, t = {t:.6g} ms, is kept in {path}") from None
            raise
        finally:
            if self.schedule:
                self.schedule.close()
            if out and out.f is not None and self.step_index < self.n_steps:
                out.close("checkpoint" if self.stopped else "error")   # a failed or stopped run keeps what it wrote
        if self.stopped:
            return {"stopped": True, "simulated_ms": self.t, "checkpoint": str(self.checkpoint_path)}
        return self._finish()

    def _snapshot(self, t: float) -> None:
        """The fields at t into the output (collective), its wall time counted (the summary's snapshots)."""
        t0 = time.perf_counter()
        self.output.snapshot(t, self.vecs())
        self.snapshots[0] += 1
        self.snapshots[1] += time.perf_counter() - t0

    def release_output(self) -> None:
        """Give up the claim on the output path (the run is over, or was refused)."""
        if self.lock is not None:
            self.lock.release()
            self.lock = None

    def write_checkpoint(self) -> None:
        """Save every piece of the run's state to checkpoint.path (collective; cardiosim/output/checkpoint.py)."""
        checkpoint.save(self, self.checkpoint_path)
        self.schedule.written()
        self.last_checkpoint = (self.checkpoint_path, self.t)

    def _announce(self) -> None:
        g, c = self.grid, self.cfg
        solvers = ", ".join(f"{s.name} {s.describe()}" for s in self.tissue.solvers())
        log.info(f"cardiosim: {c.simulation.equations}, {' + '.join(c.cell.models())}, grid {' x '.join(map(str, g.n))} "
                 f"= {g.n_nodes} nodes (h = {', '.join(f'{h:g}' for h in g.h)} cm, {self.stencil} stencil), "
                 f"{self.n_steps} steps of {self.dt:g} ms (k = {c.simulation.ode_substeps}), "
                 f"{self.comm.size} rank(s); {solvers}")
        log.info(self.reaction.placement.table())
        if self.output:
            log.info(f"output: {self.path}")
        if self.start_step:
            log.info(f"restart: from {self.last_checkpoint[0]} at t = {self.t:g} ms, appending to the output")

    def _finish(self) -> dict:
        timing = self.timers.summary(self.comm)
        self.maps.download()
        its = self.tissue.iterations()
        wall = timing["total"]["max"]
        loop = wall - self.setup_time
        simulated = self.t - self.start_step * self.dt   # by this run (after a restart: since the checkpoint)
        summary = {
            "config": self.cfg.source_name, "overrides": self.cfg.overrides,
            "config_effective": self.cfg.effective_text or self.cfg.source_text,
            "equations": self.cfg.simulation.equations,
            "cell_model": self.cfg.cell.model, "grid": [int(n) for n in self.grid.n], "nodes": self.grid.n_nodes,
            "steps": self.n_steps, "dt_ms": self.dt, "ode_substeps": self.cfg.simulation.ode_substeps,
            "simulated_ms": self.t, "wall_s": wall, "setup_s": self.setup_time,
            "setup_phases_s": self.setup_phases,
            "simulated_ms_per_wall_s": simulated / loop if loop > 0 else None,
            "restarted_at_ms": self.start_step * self.dt if self.start_step else None,
            "layout": self.layout, "timing_s": timing,
            "snapshots": {"count": self.snapshots[0], "wall_s": self.snapshots[1]},
            "iterations": {k: {"mean": sum(v) / len(v) if v else 0, "max": max(v) if v else 0,
                               "total": sum(v)} for k, v in its.items()},
            "output": str(self.path) if self.output else None,
        }
        copies = self.events.copies(self.comm)
        if copies:
            summary["petsc_log"] = copies
        summary["energy"] = energy.summary(self.comm, self.energy, *self.energy_marks[:2], self.energy.read(), loop,
                                           self.step_index - self.start_step)
        log.info("\n" + table(timing))
        log.info(f"set-up {self.setup_time:.2f} s (in 'other'): " +
                 ", ".join(f"{k} {v:.2f}" for k, v in self.setup_phases.items()))
        log.info(energy.line(summary["energy"]))
        log.info("iterations per step: " + ", ".join(
            f"{k} {v['mean']:.1f} (max {v['max']})" for k, v in summary["iterations"].items()))
        summary["warnings"] = self._check_plausible()
        if self.purkinje is not None:
            self.purkinje.finish(self.t, self.V)
            summary["purkinje"] = self.purkinje.summary()
        if self.output:
            self.output.write_map("activation_time", self.activation.time, "ms",
                                  f"first upward crossing of {self.activation.threshold} mV; NaN: not activated",
                                  threshold=self.activation.threshold)
            self.output.write_map("apd", self.apd.apd, "ms",
                                  f"APD{self.apd.level:g} of the first beat: from activation until V falls below "
                                  f"V_rest + {1 - self.apd.level / 100:g}·(V_peak − V_rest); NaN: not repolarised",
                                  level=self.apd.level)
            if self.purkinje is not None:
                self.output.write_group("purkinje", self.purkinje.arrays(), self.purkinje.attrs(),
                                        "the Purkinje network")
            if self.grid.mask is not None:
                self.output.write_map("tissue", (~self.grid.mask.outside()).astype(float), "1",
                                      "1: tissue node, 0: outside the tissue (tissue.label_file)")
            self.output.finish(timing, its, {"simulated_ms": self.t, "wall_s": wall,
                                             "gpu_energy": json.dumps(summary["energy"]),
                                             "warnings": json.dumps(summary["warnings"])})
            if self.comm.rank == 0:
                output.write_summary(self.path, summary)
            log.info(f"wrote {self.path}, {output.summary_path(self.path)} and {output.xdmf.sidecar(self.path)} "
                     f"(ParaView)")
        return summary

    def _check_plausible(self) -> list[str]:
        """The end-of-run checks (cardiosim/analysis/checks.py) on the activation map, said on stderr by rank 0; the same
        list on every rank (collective)."""
        gather, v = output.Gatherer(self.grid), self.grid.vec()
        v.getArray()[:] = self.activation.time
        act = gather(v)
        tissue = None
        if self.grid.mask is not None:
            v.getArray()[:] = ~self.grid.mask.outside()
            tissue = gather(v)
        v.destroy()

        def find():
            axes = [np.arange(n) * h + o for n, h, o in zip(self.grid.n, self.grid.h, self.grid.offset)]
            probes = checks.probe_activation(act, axes, {p.name: self.grid.node_position(self.grid.nearest_node(
                p.position)) for p in self.cfg.probe})
            found = checks.findings(act, axes, tissue if tissue is None else tissue > 0, self.cfg.checks, probes,
                                    has_ecg=bool(self.cfg.ecg.electrodes))
            for line in found:
                log.warning(line)
            return found
        return root_then_all(self.comm, find)


# Substeps of the reaction between two checks for a stop request when one PDE step has more (chunked: see
# Simulation._react). Fewer substeps per step are never split, so their results do not change.
REACTION_CHUNK = 1000


class _StopMidStep(Exception):
    pass


class Progress:
    """Rank 0 prints simulated time, rate (simulated ms per wall s) and ETA every ``interval`` wall seconds."""

    def __init__(self, n_steps, dt, interval, comm, first_step=0):
        self.n, self.dt, self.interval, self.first = n_steps, dt, interval, first_step
        self.start = self.last = time.perf_counter()
        self.quiet = interval <= 0 or comm.rank != 0

    def update(self, step, iterations):
        if self.quiet:
            return
        now = time.perf_counter()
        if now - self.last < self.interval and step < self.n:
            return
        self.last = now
        t = step * self.dt
        rate = (step - self.first) * self.dt / (now - self.start)
        eta = (self.n - step) * self.dt / rate if rate > 0 else float("inf")
        its = ", ".join(f"{k} {v[-1]}" for k, v in iterations.items() if v)
        log.info(f"t = {t:9.3f} / {self.n * self.dt:.3f} ms ({100 * step / self.n:5.1f} %) | "
                 f"{rate:8.3f} ms/s | ETA {eta:7.1f} s | its: {its}")


def _empty_cell_regions(cfg, grid, comm) -> list[str]:
    """The cell.regions that hold no (tissue) node: refused like a stimulus of no node, not silently ignored."""
    from mpi4py import MPI
    coords = grid.coords()
    outside = grid.mask.outside() if grid.mask is not None else None
    counts = [int(np.count_nonzero(grid.in_region(r, coords) & (True if outside is None else ~outside)))
              for r in cfg.cell.regions]
    counts = comm.allreduce(np.array(counts, dtype=np.int64), op=MPI.SUM) if counts else []
    return [f"cell.regions[{i}]" for i, c in enumerate(counts) if c == 0]
