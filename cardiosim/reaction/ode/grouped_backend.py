"""Grouped placement (docs/dev/design.md §4): the owner of a group of ranks integrates the cells of the whole group.

At set-up every rank of the group sends its cell count, initial states, stimulus amplitudes and node coordinates
to the owner (the group's rank 0), which builds the integrator (NumPy, native C or CUDA) for the concatenated
cells, in rank order. From then on the owner holds the cell states. Each PDE step:

    members' Vm  --Gatherv-->  owner's buffer (page-locked with CUDA)  ->  k substeps  --Scatterv-->  members' Vm

With ``exchange = "full"`` every state row crosses both ways, as the seed simulator did; the members then hold
a current copy of all their states (the owner's copy is overwritten by what they send, which is what it sent
them: the two modes give the same numbers).

Failures: a bad state found by the owner's integrator is recorded in ``failure`` on the owner; the reaction
step's collective check (Reaction.check) brings it to every rank. An exception on any rank is a bug and aborts
the job (cardiosim.cli), so a member never waits forever in a Gatherv or Scatterv.

Timing: the owner counts its Gatherv and Scatterv as "exchange" and its integration as "reaction". A member
counts its Gatherv as "exchange"; its Scatterv, where it waits for the owner to integrate its cells, stays in
"reaction" (the time its cells take), so that the maximum over ranks of each phase says what it costs the job.
"""

from __future__ import annotations

from contextlib import nullcontext

import numpy as np

from cardiosim.cells.stimulus import TissueStimuli


class GroupedBackend:
    name = "grouped"

    def __init__(self, model, states: np.ndarray, stimuli, coords: np.ndarray, placement, make_integrator,
                 timers=None):
        """``states`` (n_states, n_local), ``stimuli`` and ``coords`` (n_local, dim) of this rank's cells;
        ``placement.group`` the group communicator (owner = rank 0), ``placement.exchange`` 'vm' or 'full';
        ``make_integrator(states, stimuli, coords, rows)`` builds the owner's backend for the whole group, where
        ``rows`` are the state rows that cross its host copy each step."""
        from mpi4py import MPI
        self.double = MPI.DOUBLE
        self.group = group = placement.group
        self.owner = group.rank == 0
        self.y = states
        n_states, n_local = states.shape
        self.rows = (0,) if placement.exchange == "vm" else tuple(range(n_states))
        self.counts = np.array(group.allgather(n_local), dtype=np.int64)
        self.displs = np.concatenate([[0], np.cumsum(self.counts)[:-1]])
        self.n_cells = int(self.counts.sum())
        self.timers = timers
        self.failure: str | None = None
        self.integrator = None

        host = np.empty((n_states, self.n_cells)) if self.owner else None
        self._gather(states, host, range(n_states))
        n_p = len(stimuli.protocols)
        amps = np.empty((n_p, self.n_cells)) if self.owner else None
        self._gather(np.ascontiguousarray(stimuli.amplitudes, dtype=np.float64).reshape(n_p, n_local), amps,
                     range(n_p))
        dim = coords.shape[1]
        xyz = np.empty((dim, self.n_cells)) if self.owner else None
        self._gather(np.ascontiguousarray(coords.T), xyz, range(dim))
        if self.owner:
            group_stimuli = TissueStimuli(stimuli.protocols, amps, stimuli.names)
            self.integrator = make_integrator(host, group_stimuli, np.ascontiguousarray(xyz.T), self.rows)
            self.stimuli = group_stimuli
            self.host = self.integrator.y     # the integrator's host copy (page-locked for CUDA)

    def _timer(self, phase):
        return self.timers(phase) if self.timers else nullcontext()

    def _gather(self, src, dst, rows):
        for s in rows:
            recv = [dst[s], self.counts, self.displs, self.double] if self.owner else None
            self.group.Gatherv(src[s], recv, root=0)

    def _scatter(self, src, dst, rows):
        for s in rows:
            send = [src[s], self.counts, self.displs, self.double] if self.owner else None
            self.group.Scatterv(send, dst[s], root=0)

    def advance(self, t0: float, dt: float, k: int, stimuli) -> None:
        """k substeps of dt ms from t0 for every cell of the group (collective over the group); ``stimuli`` is
        this rank's, unused: the owner holds the group's."""
        with self._timer("exchange"):
            self._gather(self.y, self.host if self.owner else None, self.rows)
        if self.owner:
            self.integrator.advance(t0, dt, k, self.stimuli)
            self.failure = self.integrator.failure
        with self._timer("exchange") if self.owner else nullcontext():
            self._scatter(self.host if self.owner else None, self.y, self.rows)

    def download(self) -> None:
        """Bring every state of this rank's cells to ``y`` (collective over the group; for output or checks of
        states other than Vm)."""
        if self.owner and hasattr(self.integrator, "download"):
            self.integrator.download()
        self._scatter(self.host if self.owner else None, self.y, range(self.y.shape[0]))

    def upload(self) -> None:
        """Replace every state of the group by the members' host copies ``y`` (collective over the group; a
        restart)."""
        self._gather(self.y, self.host if self.owner else None, range(self.y.shape[0]))
        if self.owner:
            self.integrator.upload()
