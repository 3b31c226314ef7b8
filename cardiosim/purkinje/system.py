"""The conduction system in a run (``[purkinje]``): the network (a file, or grown on the endocardia of the run's
geometry file), refined to the cable's spacing, its cells and cable (cardiosim.purkinje.cable) and the PMJs to the
tissue (cardiosim.purkinje.coupling). The time loop (cardiosim.simulation.loop) calls :meth:`System.step` at the
start of every PDE step, before the tissue's reaction: the junctions' step, then the cable's reaction and diffusion,
with the run's dt, ODE substeps and splitting (the cable's diffusion by backward Euler whatever
simulation.time_scheme).

The tissue side is this process's nodes: their coordinates (cm), the lumped mass (cm^d per node, the tissue
equations' M) and which are outside the tissue. A 1D or 2D tissue has no volume of its own: ``pmj_depth`` (cm, 0:
one grid spacing) is its missing extent, a node's volume M·depth^(3 − d), as the pseudo-ECG's sheet_thickness.
"""

from __future__ import annotations

import numpy as np

from cardiosim.purkinje import grow, network as networks
from cardiosim.purkinje.cable import Cable, Stimulus, make_model
from cardiosim.purkinje.coupling import Junctions, tissue_capacitance
from cardiosim.runtime.errors import UserError


def grow_parameters(tree) -> grow.GrowParameters:
    """purkinje.tree as the generator's parameters."""
    return grow.GrowParameters(segment=tree.segment, his_length=tree.his_length, bundle_length=tree.bundle_length,
                               fascicle_length=tree.fascicle_length, lv_fascicles=tuple(tree.lv_fascicles),
                               rv_fascicles=tuple(tree.rv_fascicles), branch_length=tree.branch_length,
                               branch_angle=tree.branch_angle, length_jitter=tree.length_jitter,
                               angle_jitter=tree.angle_jitter, generations=tree.generations,
                               spacing=tree.spacing, repulsion=tree.repulsion,
                               apex_direction=tuple(tree.apex_direction), seed=tree.seed)


def build_network(p, label_file: str = "") -> networks.Network:
    """The network of ``p`` (the config's purkinje section): its file, or grown on label_file's endocardia."""
    if p.network:
        return networks.read(p.network, root=p.root or None, units=p.units)
    lv, rv, h = grow.geometry_surfaces(label_file, p.tree.apex_direction)
    params = grow_parameters(p.tree)
    root = np.asarray(p.root, float) if p.root else grow.septal_root(lv, rv, params.apex_direction, h=h)
    return grow.conduction_system(lv, rv, root, params)


class System:
    """``cfg``: the run's config (its purkinje, simulation, tissue and output sections); ``coords`` (n, dim) cm,
    ``mass`` (n,) cm^d and ``outside`` ((n,) bool or None): the tissue's nodes."""

    def __init__(self, cfg, coords, mass, outside=None):
        p, sim, tis = cfg.purkinje, cfg.simulation, cfg.tissue
        self.net = build_network(p, tis.label_file).check().refine(p.spacing)
        model = make_model(p.model or None, None, p.parameters, Cm=p.Cm, chi=p.chi or 2.0 / p.radius)
        s = p.stimulus
        self.cable = Cable(self.net, model, p.sigma, sim.dt, radius=None if self.net.radius is not None else p.radius,
                           chi=p.chi or None, Cm=p.Cm, ode_substeps=sim.ode_substeps, integrator=p.integrator,
                           splitting=sim.splitting, time_scheme="backward-euler",
                           stimulus=Stimulus(s.current_density, s.start, s.duration, s.period, s.count, s.radius),
                           threshold=cfg.output.activation_threshold, fibres=p.fibres)
        coords = np.asarray(coords, dtype=float)
        dim = coords.shape[1]
        depth = p.pmj_depth or float(min(cfg.grid.spacing))
        volume = np.asarray(mass, dtype=float) * depth ** (3 - dim)                     # cm³
        terminals = self.net.terminals
        self.junctions = Junctions(terminals, self.net.points[terminals], coords, p.pmj_radius, p.pmj_resistance,
                                   self.cable.C[terminals], tissue_capacitance(volume, tis.Cm, tis.chi), volume,
                                   sim.dt, tissue=None if outside is None else ~np.asarray(outside, bool))
        if self.junctions.n == 0:
            raise UserError(f"purkinje: none of the network's {len(terminals)} terminals has a tissue node within "
                            f"purkinje.pmj_radius = {p.pmj_radius} cm (is the network in the grid's coordinates? "
                            f"grid.origin, purkinje.units)")
        self.model_name = model.name or str(p.model)
        self.charge = np.zeros(self.junctions.n)          # µA·ms = nC through each junction, Purkinje -> tissue

    def step(self, t: float, vm: np.ndarray) -> None:
        """One PDE step from t: the junctions (``vm``, this process's tissue Vm, changed in place), then the
        cable's cells and diffusion."""
        self.charge += self.cable.dt * self.junctions.step(self.cable.V, vm)
        self.cable.step(t)

    def describe(self) -> str:
        n, j = self.net, self.junctions
        return (f"purkinje: {n.n_nodes} nodes, {n.n_edges} edges ({n.lengths.sum():.3g} cm), {j.n} of "
                f"{len(n.terminals)} terminals coupled (PMJs, R = {np.unique(j.resistance)[0]:g} kOhm) to "
                f"{len(j.tissue_nodes)} tissue nodes; cells: {self.model_name}")

    def arrays(self) -> dict:
        """What the output keeps (/purkinje): {name: (array, units, description)}."""
        n, j, c = self.net, self.junctions, self.cable
        coupled = np.zeros(n.n_nodes, np.int8)
        coupled[j.terminals] = 1
        out = {
            "activation_time": (c.activation, "ms", "first upward crossing of output.activation_threshold at each "
                                                    "node of the network; NaN: not activated"),
            "points": (n.points, "cm", "node positions (x, y, z)"),
            "edges": (n.edges, "1", "node pairs"),
            "pmj": (coupled, "1", "1: a terminal coupled to the tissue (a PMJ)"),
            "distance": (n.distance(), "cm", "path length from the root"),
            "pmj_charge": (self.charge, "nC", "charge through each PMJ (in the order of pmj's nodes), Purkinje to "
                                              "tissue"),
        }
        if "part" in n.data:
            out["part"] = (n.data["part"], "1", "1 His, 2 LBB, 3 RBB, 4 LV fascicles, 5 RV fascicles, 6 LV tree, "
                                                "7 RV tree (grown networks)")
        return out

    def attrs(self) -> dict:
        return {"root": int(self.net.root), "cell_model": self.model_name, "dt_ms": self.cable.dt}


__all__ = ["System", "build_network", "grow_parameters"]
