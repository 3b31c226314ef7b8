"""Placement: which rank integrates which cells, on which device (docs/dev/design.md §4).

Modes (``cell.placement``):

- ``cpu``: every rank integrates its own cells on its CPU (``cell.backend`` numpy or native).
- ``grouped``: the ranks of a node are split into groups; the lowest rank of each group (the *owner*) holds the
  cell states of the whole group for the whole run and integrates them; each PDE step the members' Vm (or, with
  ``cell.exchange = "full"``, every state) is gathered to the owner and scattered back. With ``cell.backend =
  "cuda"`` there is one group per visible GPU and its owner holds the only context on that GPU; with a CPU
  integrator (numpy, native) ``cell.groups_per_node`` sets the number of groups, so that the grouping runs
  without a GPU (CI).
- ``per-rank``: every rank holds its own context on GPU (node rank mod GPUs) — the Hyper-Q/MPS layout.
- ``resident``: one rank per GPU (the node rank picks it); PETSc's vectors and matrices are GPU types on that GPU
  and the cell kernel works on Vm in the Vec's device memory: no host copies inside the stepping loop
  (cardiosim.reaction.ode.resident). More ranks than GPUs on a node is refused unless ``cell.share_gpu`` (tests).
- ``auto``: ``grouped`` when the cells go to the GPU (``cell.backend = "cuda"``), else ``cpu``.

Groups are contiguous blocks of node ranks, as even as possible (the first ones one rank larger); a node with more
GPUs than ranks leaves the extra GPUs idle (said once). GPUs are the ones the CUDA driver shows
(``CUDA_VISIBLE_DEVICES`` applies), ordinals counted from 0 within them.

Each mode is one small class (:class:`Mode`: which integrator it takes, how it plans a node, who holds a GPU
context, which backend it builds); ``MODE`` maps the config value to it, so a new placement is one class.
:func:`plan_node` is the pure assignment (unit-tested without MPI); :func:`place` applies it on the MPI
communicators and returns this rank's :class:`Placement`.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from cardiosim.runtime.errors import UserError
from cardiosim.runtime.gpu import NO_PYCUDA, arch_of, gpus_without_cuda, import_pycuda, visible_gpus
from cardiosim import cells
from cardiosim.reaction.ode.grouped_backend import GroupedBackend
from cardiosim.reaction.ode.protocol import OnHost
from cardiosim.reaction.ode.resident import ResidentBackend

EXCHANGES = ("vm", "full")


@dataclass(frozen=True)
class NodePlan:
    """One node's assignment: ``group[r]`` for each node rank r, the owner (node rank) and device of each group
    (None: CPU), and the GPUs no group uses."""

    group: tuple[int, ...]
    owner: tuple[int, ...]
    device: tuple[int | None, ...]
    idle_gpus: tuple[int, ...] = ()


def blocks(n_ranks: int, n_groups: int) -> tuple[int, ...]:
    """Group of each of ``n_ranks`` ranks: ``n_groups`` contiguous blocks whose sizes differ by at most one."""
    if not 1 <= n_groups <= n_ranks:
        raise ValueError(f"cannot split {n_ranks} ranks into {n_groups} groups")
    base, extra = divmod(n_ranks, n_groups)
    out = []
    for g in range(n_groups):
        out += [g] * (base + (g < extra))
    return tuple(out)


# -- the modes: one small class each; MODE[name] is the table every caller goes through ------------------------
class Mode:
    """A placement mode. ``name``: the config value; ``grouped``: ranks are split into group communicators;
    ``gpu_pde``: the grid's vectors and matrices are GPU types (cardiosim.domain.grid); ``on_device``: the analysis and
    probes read Vm on the device (cardiosim.reaction.ode.resident)."""
    name = ""
    grouped = False
    gpu_pde = False
    on_device = False

    def integrator(self, backend: str, auto: bool = False) -> str:
        """The integrator (numpy, native or cuda) for ``cell.backend`` (``auto``: the config said auto and
        ``backend`` is the CPU one it resolves to); UserError where the mode cannot use it."""
        return backend

    def plan(self, n_ranks: int, n_gpus: int, groups_per_node: int = 1, share_gpu: bool = False) -> NodePlan:
        raise NotImplementedError

    def holds_context(self, integrator: str, group_rank: int | None) -> bool:
        """Whether this rank holds a context on its group's GPU."""
        return False

    def backend(self, reaction, model, states, stimuli, coords, timers, at=None):
        """This rank's cell backend (cardiosim.reaction.ode.protocol.CellBackend) for the reaction step ``reaction``:
        ``model`` with ``states``; ``at``: the local nodes of these cells where they are not all of them
        (ode.protocol.Pieces)."""
        return OnHost(reaction.integrator(model, states, stimuli, coords, rows=(0,)), stimuli)


class Cpu(Mode):
    name = "cpu"

    def integrator(self, backend, auto=False):
        if backend == "cuda":
            raise UserError("cell.placement: 'cpu' integrates the cells on the CPU but cell.backend is 'cuda'; "
                            "use placement 'grouped', 'per-rank' or 'resident' (or 'auto') with cuda")
        return backend

    def plan(self, n_ranks, n_gpus=0, groups_per_node=1, share_gpu=False):
        return NodePlan(tuple(range(n_ranks)), tuple(range(n_ranks)), (None,) * n_ranks)


class Grouped(Mode):
    name = "grouped"
    grouped = True

    def plan(self, n_ranks, n_gpus=0, groups_per_node=1, share_gpu=False):
        n_groups = min(n_ranks, n_gpus if n_gpus > 0 else groups_per_node)
        group = blocks(n_ranks, n_groups)
        owner = tuple(group.index(g) for g in range(n_groups))
        device = tuple(range(n_groups)) if n_gpus > 0 else (None,) * n_groups
        return NodePlan(group, owner, device, tuple(range(n_groups, n_gpus)))

    def holds_context(self, integrator, group_rank):
        return integrator == "cuda" and group_rank == 0

    def backend(self, reaction, model, states, stimuli, coords, timers, at=None):
        from functools import partial

        grouped = GroupedBackend(model, states, stimuli, coords, reaction.placement,
                                 partial(reaction.integrator, model), timers)
        return OnHost(grouped, stimuli)


class PerRank(Mode):
    name = "per-rank"

    def integrator(self, backend, auto=False):
        if backend != "cuda":
            raise UserError(f"cell.placement: 'per-rank'' gives every rank its own GPU context and needs cell.backend "
                            f"= 'cuda'; with '{backend}' every rank integrates its own cells: that is placement 'cpu'")
        return backend

    def plan(self, n_ranks, n_gpus=0, groups_per_node=1, share_gpu=False):
        if n_gpus < 1:
            raise ValueError("per-rank placement needs a GPU")
        return NodePlan(tuple(range(n_ranks)), tuple(range(n_ranks)), tuple(r % n_gpus for r in range(n_ranks)),
                        tuple(range(n_ranks, n_gpus)))

    def holds_context(self, integrator, group_rank):
        return integrator == "cuda"


class Resident(Mode):
    """One rank per GPU: the PDE's vectors and matrices, the cell states, the stimulus tables, the analysis
    accumulators and the probe samples all on the rank's GPU; nothing crosses to the host inside the stepping loop
    (cardiosim.reaction.ode.resident). The node rank picks the GPU; more ranks than GPUs is refused unless
    ``cell.share_gpu`` (tests: 2 ranks on a one-GPU machine), where node rank mod GPUs."""
    name = "resident"
    gpu_pde = True
    on_device = True

    def integrator(self, backend, auto=False):
        if backend != "cuda" and not auto:
            raise UserError(f"cell.placement: 'resident' integrates the cells on the GPU and needs cell.backend = "
                            f"'cuda' (or 'auto'), not '{backend}'")
        return "cuda"

    def plan(self, n_ranks, n_gpus=0, groups_per_node=1, share_gpu=False):
        if n_gpus < 1:
            raise ValueError("resident placement needs a GPU")
        if n_ranks > n_gpus and not share_gpu:
            raise UserError(f"cell.placement: 'resident' runs one MPI rank per GPU, but a node has {n_ranks} ranks "
                            f"and {n_gpus} GPU(s); start {n_gpus} rank(s) per node (cell.share_gpu = true lets "
                            f"ranks share a GPU, for tests)")
        return NodePlan(tuple(range(n_ranks)), tuple(range(n_ranks)), tuple(r % n_gpus for r in range(n_ranks)),
                        tuple(range(n_ranks, n_gpus)))

    def holds_context(self, integrator, group_rank):
        return True

    def backend(self, reaction, model, states, stimuli, coords, timers, at=None):
        c, p = reaction.cell, reaction.placement
        return ResidentBackend(model, states, stimuli, p.device, p.kernel_comm, c.integrator, c.kernel, at)


MODE = {m.name: m for m in (Cpu(), Grouped(), PerRank(), Resident())}
MODES = ("auto", *MODE)


def plan_node(n_ranks: int, mode: str, n_gpus: int = 0, groups_per_node: int = 1,
              share_gpu: bool = False) -> NodePlan:
    """The assignment on one node of ``n_ranks`` ranks for ``mode`` (cpu, grouped, per-rank, resident; not auto).

    grouped: one group per GPU when ``n_gpus`` > 0 (at most one per rank), else ``groups_per_node`` groups with a
    CPU owner. per-rank: every rank is its own group, on GPU rank mod n_gpus. resident: the same, but at most one
    rank per GPU unless ``share_gpu``. cpu: every rank its own group, CPU.
    """
    if n_ranks < 1:
        raise ValueError("a node has at least one rank")
    if mode not in MODE:
        raise ValueError(f"unknown placement mode {mode!r}")
    return MODE[mode].plan(n_ranks, n_gpus, groups_per_node, share_gpu)


def resolve(placement: str, backend: str, has_kernel: bool, model: str = "the model") -> tuple[str, str]:
    """(mode, integrator) from ``cell.placement`` and ``cell.backend``; UserError for combinations that make no
    sense. The integrator is numpy, native or cuda."""
    auto = backend == "auto"
    if auto:
        backend = "native" if has_kernel else "numpy"
    if (backend in ("native", "cuda") or placement == "resident") and not has_kernel:
        raise UserError(f"cell.backend: '{'cuda' if placement == 'resident' else backend}' needs a C kernel and "
                        f"{model} has none; use 'numpy' (or 'auto') with a CPU placement")
    mode = placement
    if mode == "auto":
        mode = "grouped" if backend == "cuda" else "cpu"
    return mode, MODE[mode].integrator(backend, auto)


@dataclass
class Placement:
    """This rank's place. ``group``: the communicator of its group (rank 0 = the owner), None in cpu mode;
    ``device``: the GPU ordinal this rank holds a context on (owners in grouped mode, every rank per-rank), else
    None; ``kernel_comm``: the ranks of this node holding a context on a GPU of this rank's architecture (they
    share one compiled kernel), None where this rank holds none; ``layout``: the job's layout (the same on every
    rank), as stored in the output."""

    mode: str
    integrator: str
    exchange: str
    node: int
    node_rank: int
    group: object = None
    device: int | None = None
    kernel_comm: object = None
    layout: dict = field(default_factory=dict)

    def table(self) -> str:
        return layout_table(self.layout)


def _gpu_label(ordinal: int | None) -> str:
    """'GPU 1' or, where CUDA_VISIBLE_DEVICES renumbers the devices, 'GPU 1 (CUDA_VISIBLE_DEVICES 3)'."""
    if ordinal is None:
        return "CPU"
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")]
    phys = visible[ordinal] if ordinal < len(visible) and visible[ordinal] else str(ordinal)
    return f"GPU {ordinal}" + (f" (CUDA_VISIBLE_DEVICES {phys})" if phys != str(ordinal) else "")


def _arch(ordinal: int) -> int:
    """GPU ``ordinal``'s architecture as a number (sm_90: 90), CUDA initialised."""
    return int(arch_of(import_pycuda().Device(ordinal)).removeprefix("sm_"))


def node_rank_and_size(comm) -> tuple[int, int]:
    """This rank's index among the ranks of its node, and their number (collective over ``comm``)."""
    from mpi4py import MPI
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    out = node.rank, node.size
    node.Free()
    return out


def petsc_device_options(comm=None, given=()) -> list[str]:
    """PETSc options choosing this rank's GPU: ``-device_select <node rank mod GPUs>``, the GPU the resident
    placement gives this rank (PETSc's own default is the *global* rank mod GPUs, wrong on several nodes whose
    rank counts are not a multiple of their GPUs). For petsc4py.init, before PETSc initialises its device; empty
    where no GPU is seen or the user set any -device_ option (``given`` or PETSC_OPTIONS: theirs win, and
    -device_enable none refuses a -device_select)."""
    if comm is None:
        from mpi4py import MPI
        comm = MPI.COMM_WORLD
    rank, _ = node_rank_and_size(comm)            # collective: every rank, whatever it sees
    n = gpus_without_cuda()
    theirs = [*given, *os.environ.get("PETSC_OPTIONS", "").split()]
    if n == 0 or any(str(a).startswith("-device_") for a in theirs):
        return []
    return ["-device_select", str(rank % n)]


def check_petsc_device(device: int) -> None:
    """UserError unless PETSc's CUDA device is ``device`` (the resident placement needs PETSc's vectors and the
    cell kernel on one GPU, in one primary context)."""
    from petsc4py import PETSc
    dctx = PETSc.DeviceContext.getCurrent()
    got = dctx.getDevice()
    if str(got.getDeviceType()).upper() != "CUDA" or got.getDeviceId() != device:
        raise UserError(f"cell.placement: 'resident' needs PETSc on GPU {device} of this rank, but PETSc uses "
                        f"{got.getDeviceType()} device {got.getDeviceId()}; drop -device_select/-device_enable "
                        f"from the PETSc options")


def check_resident(cell, comm) -> None:
    """For cell.placement = 'resident', what its GPU needs, before anything else of the run is set up (no file
    written, no lock taken, no PETSc object made): PyCUDA, a visible GPU and a PETSc built with CUDA on every rank.
    Collective: every rank raises the same one line, so none is left waiting (the first CUDA vector would
    otherwise fail in PETSc on some ranks with a traceback)."""
    if cell.placement != "resident":
        return
    why = _resident_missing()
    found = comm.allgather(f"{why} on {socket.gethostname()}" if why else "")
    missing = next((w for w in found if w), "")
    if missing:
        raise UserError(f"cell.placement: 'resident' runs the tissue and the cells on a CUDA GPU, but {missing}; "
                        f"use cell.placement = 'cpu' (or 'auto') on a machine without one")


def _resident_missing() -> str:
    """Why this rank cannot hold the resident placement ('' if it can), found without initialising CUDA (which
    PETSc must do itself, on the device it was told: petsc_device_options)."""
    import importlib.util
    if importlib.util.find_spec("pycuda") is None:
        return NO_PYCUDA
    if gpus_without_cuda() == 0:
        return "no GPU is visible (no NVIDIA driver, or CUDA_VISIBLE_DEVICES is empty)"
    from petsc4py import PETSc
    if not PETSc.Sys.hasExternalPackage("cuda"):
        return ("this PETSc was built without CUDA (CARDIOSIM_GPU=1 make setup builds one, or set PETSC_DIR/PETSC_ARCH "
                "to a PETSc configured --with-cuda)")
    return ""


def place(cell, comm) -> Placement:
    """This rank's placement for the config section ``cell`` (collective over ``comm``).

    ``cell.model``'s kernel decides what the integrator may be; the config keys are ``placement``, ``backend``,
    ``exchange`` and ``groups_per_node``.
    """
    from mpi4py import MPI

    # the cells of every model of the run are integrated the same way (cell.regions may name other models)
    without = [m for m in cell.models() if cells.model_class(m).kernel_name is None]
    mode, integrator = resolve(cell.placement, cell.backend, not without, without[0] if without else cell.model)
    node = comm.Split_type(MPI.COMM_TYPE_SHARED, key=comm.rank)
    leaders = comm.Split(0 if node.rank == 0 else MPI.UNDEFINED, comm.rank)
    node_index = node.bcast(leaders.rank if node.rank == 0 else None, root=0)
    if leaders != MPI.COMM_NULL:
        leaders.Free()

    m = MODE[mode]
    n_gpus, why = visible_gpus() if integrator == "cuda" else (0, "")
    bad = comm.allgather(f"cell.backend: 'cuda' found no usable GPU on {socket.gethostname()}: {why}"
                         if integrator == "cuda" and n_gpus == 0 else None)
    if any(bad):
        raise UserError(next(m for m in bad if m))
    n_gpus = min(node.allgather(n_gpus))   # ranks of one node see the same GPUs, unless told otherwise
    plan = plan_node(node.size, mode, n_gpus, cell.groups_per_node, getattr(cell, "share_gpu", False))
    g = plan.group[node.rank]
    group = node.Split(g, node.rank) if m.grouped else None
    holds = m.holds_context(integrator, group.rank if group is not None else None)
    device = plan.device[g] if holds else None
    if m.gpu_pde:
        check_petsc_device(device)
    # The node's context holders share one compiled kernel per GPU architecture.
    kernel_comm = node.Split(_arch(device) if holds else MPI.UNDEFINED, node.rank)
    if kernel_comm == MPI.COMM_NULL:
        kernel_comm = None

    host = socket.gethostname()
    rows = comm.allgather((node_index, host, node.rank, comm.rank, g, plan.owner[g], _gpu_label(plan.device[g])))
    idle = comm.allgather((node_index, host, plan.idle_gpus) if node.rank == 0 else None)
    layout = _layout(mode, integrator, cell.exchange if m.grouped else "-", rows,
                     [i for i in idle if i and i[2]])
    node_rank = node.rank
    node.Free()
    return Placement(mode, integrator, cell.exchange, node_index, node_rank, group, device, kernel_comm, layout)


def _layout(mode, integrator, exchange, rows, idle) -> dict:
    """The job's layout as a JSON-able dict: one entry per group (node, host, ranks, device, owner rank)."""
    groups: dict[tuple[int, int], dict] = {}
    for node, host, node_rank, world_rank, g, owner_node_rank, where in rows:
        e = groups.setdefault((node, g), {"node": node, "host": host, "ranks": [], "cells_on": where,
                                          "owner": None})
        e["ranks"].append(world_rank)
        if node_rank == owner_node_rank:
            e["owner"] = world_rank
    return {"placement": mode, "ode_backend": integrator, "exchange": exchange,
            "groups": [groups[k] for k in sorted(groups)],
            "idle_gpus": [{"node": n, "host": h, "gpus": list(ids)} for n, h, ids in idle]}


def _ranks(ranks: list[int]) -> str:
    """[0, 1, 2, 5, 7, 8] -> '0-2,5,7-8'."""
    out, start = [], None
    for i, r in enumerate(ranks):
        if start is None:
            start = r
        if i + 1 == len(ranks) or ranks[i + 1] != r + 1:
            out.append(f"{start}" if start == r else f"{start}-{r}")
            start = None
    return ",".join(out)


def layout_table(layout: dict) -> str:
    """The layout as a small table for the start of a run: node, host, ranks, where their cells are integrated,
    by whom. cpu and per-rank modes get one line per node and device (every rank integrates its own cells)."""
    mode, ex = layout["placement"], layout["exchange"]
    grouped = mode in MODE and MODE[mode].grouped
    lines = [f"placement {mode}, cells on {layout['ode_backend']}" + (f", exchange {ex}" if grouped else ""),
             f"{'node':<6}{'host':<20}{'ranks':<16}{'cells on':<36}integrated by"]
    rows = layout["groups"]
    if not grouped:
        merged: dict[tuple, dict] = {}
        for e in rows:
            m = merged.setdefault((e["node"], e["cells_on"]), dict(e, ranks=[], owner=None))
            m["ranks"] = m["ranks"] + e["ranks"]
        rows = [merged[k] for k in sorted(merged, key=lambda k: (k[0], min(merged[k]["ranks"])))]
    for e in rows:
        owner = f"rank {e['owner']}" if e["owner"] is not None else "each rank"
        lines.append(f"{e['node']:<6}{e['host'][:19]:<20}{_ranks(sorted(e['ranks'])):<16}{e['cells_on']:<36}{owner}")
    for i in layout["idle_gpus"]:
        lines.append(f"node {i['node']} ({i['host']}): GPU {', '.join(map(str, i['gpus']))} idle "
                     f"(fewer ranks than GPUs)")
    return "\n".join(lines)
