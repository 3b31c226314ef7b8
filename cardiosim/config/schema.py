"""The config's keys: one dataclass per TOML section, each key declared once with ``key`` (type, default, unit,
allowed values, a line of documentation). Validation (cardiosim.config.validate), loading and ``--set``
(cardiosim.config.load) and the key reference (cardiosim.config.reference) read these declarations.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from cardiosim.analysis import checks
from cardiosim.purkinje import grow
from cardiosim.runtime.errors import UserError
from cardiosim.reaction.ode import kernel_variants


class ConfigError(UserError):
    """A user mistake in a config file or a command-line override; the message is one line."""


def key(default=dataclasses.MISSING, *, unit="", doc="", gt=None, ge=None, le=None, lt=None,
        choices=None, length=None, factory=None):
    """Declare a config key. ``length`` is (min, max) for lists; numeric bounds apply to each element."""
    meta = dict(unit=unit, doc=doc, gt=gt, ge=ge, le=le, lt=lt, choices=choices, length=length)
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


# --------------------------------------------------------------------------------------------------------------
# Sections
# --------------------------------------------------------------------------------------------------------------
@dataclass(kw_only=True)
class Simulation:
    equations: str = key("bidomain", choices=("bidomain", "monodomain"),
                         doc="bidomain: Vm and φe; monodomain: Vm with σm = σi·σe/(σi+σe)")
    duration: float = key(unit="ms", gt=0, doc="simulated time")
    dt: float = key(unit="ms", gt=0, doc="PDE time step Δt_p")
    ode_substeps: int = key(1, ge=1, le=1_000_000, doc="ODE substeps k per PDE step, each by cell.integrator: Δt_o = dt / k")
    splitting: str = key("godunov", choices=("godunov", "strang"),
                         doc="operator splitting: godunov (reaction, diffusion) or strang (½ reaction, diffusion, ½ reaction)")
    time_scheme: str = key("crank-nicolson", choices=("backward-euler", "crank-nicolson"),
                           doc="implicit scheme of the parabolic step")
    progress_interval: float = key(5.0, unit="s", ge=0, doc="wall time between progress lines on rank 0 (0: none)")

    @property
    def n_steps(self) -> int:
        """PDE steps of the run (duration / dt, rounded)."""
        return int(round(self.duration / self.dt))


@dataclass(kw_only=True)
class Grid:
    size: list[float] = key(unit="cm", gt=0, length=(1, 3),
                            doc="tissue extent per dimension [Lx, Ly, Lz]; its length sets the dimension (1-3)")
    spacing: list[float] = key(unit="cm", gt=0, length=(1, 3),
                               doc="node spacing: one number for all dimensions, or one per dimension; "
                                   "size/spacing must be (close to) a whole number")
    stencil: str = key("auto", choices=("auto", "star", "box"),
                       doc="star: 3/5/7-point, needs axis-aligned fibres; box: full tensor incl. cross terms "
                           "(Q1 element stencil); auto: star when every fibre is axis-aligned")
    origin: list[float] = key(factory=list, unit="cm", length=(0, 3),
                              doc="where the first node sits: the box spans origin … origin + size (default 0); "
                                  "cardiosim geometry prints the origin of the anatomy it wrote, so that regions, "
                                  "probes and electrodes are in the anatomy's own coordinates")
    balance: str = key("auto", choices=("auto", "tissue", "box"),
                       doc="with tissue.label_file on several ranks, how the box is split over the ranks: box: PETSc's "
                           "even split of the box; tissue: PETSc's process grid with the cuts moved so that the ranks "
                           "hold as many tissue nodes (cells) each as the boxes allow; auto: tissue, except for the "
                           "resident placement (its linear systems are solved on the whole box). Without a label file "
                           "the box split, whatever this says "
                           "(docs/decisions/0030-decomposition-balanced-by-tissue.md)")


# The ventricular coordinates a region can be chosen by (datasets of a geometry file: cardiosim.domain.fibres)
COORDINATES = ("transmural", "apex_base", "lv_rv")


@dataclass(kw_only=True)
class Region:
    shape: str = key(choices=("box", "sphere", "label", "coordinate"),
                     doc="region shape; label: the tissue nodes of one label of tissue.label_file; coordinate: the "
                         "tissue nodes where a ventricular coordinate of tissue.label_file lies in a range")
    lower: list[float] = key(None, unit="cm", length=(1, 3), doc="box: lower corner")
    upper: list[float] = key(None, unit="cm", length=(1, 3), doc="box: upper corner")
    center: list[float] = key(None, unit="cm", length=(1, 3), doc="sphere: centre")
    radius: float = key(None, unit="cm", gt=0, doc="sphere: radius")
    label: int = key(None, ge=1, doc="label: the label value (tissue.label_file)")
    coordinate: str = key(None, choices=COORDINATES,
                          doc="coordinate: which ventricular coordinate of tissue.label_file (a cardiosim geometry "
                              "file with rule-based fibres: cardiosim geometry lv or biv, or geometry fibres): "
                              "transmural (0 endocardium to 1 epicardium), apex_base (0 apex to 1 base), lv_rv "
                              "(0 LV to 1 RV endocardium)")
    range: list[float] = key(None, unit="1", length=(2, 2),
                             doc="coordinate: [lower, upper], both included (e.g. [0.0, 0.3] for the endocardial "
                                 "third)")


@dataclass(kw_only=True)
class ConductivityRegion(Region):
    scale_intra: float = key(1.0, ge=0, doc="factor on σi inside the region (0: scar)")
    scale_extra: float = key(1.0, ge=0, doc="factor on σe inside the region")


JUNCTION_TYPES = ("p", "i", "c", "none")


@dataclass(kw_only=True)
class Junctions:
    end: str = key("p", choices=JUNCTION_TYPES,
                   doc="junction type of the end-to-end faces between two myocytes: p (plicate, G_p), i "
                       "(interplicate, G_i), c (combined, G_c), none (no junction)")
    lateral_disc: str = key("i", choices=JUNCTION_TYPES,
                            doc="junction type of the side-to-side faces within disc_zone of a myocyte's end")
    lateral: str = key("c", choices=JUNCTION_TYPES, doc="junction type of the other side-to-side faces")
    noise_cv: float = key(0.0, ge=0, doc="coefficient of variation of a log-normal factor (mean 1) on every "
                                         "junction face (0: none)")
    dropout: float = key(0.0, ge=0, le=1, doc="probability that a junction face carries no junction")


@dataclass(kw_only=True)
class Fibrosis:
    fraction: float = key(0.0, ge=0, lt=1, doc="fraction of myocytes made non-conducting (every face touching "
                                                "them has g = 0, they are never stimulated)")


@dataclass(kw_only=True)
class JunctionRegion(Region):
    scale_p: float = key(1.0, ge=0, doc="factor on G_p of the junction faces whose centre is in the region")
    scale_i: float = key(1.0, ge=0, doc="factor on G_i there")
    scale_c: float = key(1.0, ge=0, doc="factor on G_c there")


@dataclass(kw_only=True)
class Microscopic:
    sigma_c: float = key(0.4, unit="uS/um", gt=0, doc="cytoplasm conductivity (0.4 uS/um = 4 mS/cm); a face "
                                                      "inside a myocyte conducts sigma_c x area / distance")
    G_p: float = key(0.5, unit="uS", ge=0, doc="plicate gap-junction conductance of one face")
    G_i: float = key(0.33, unit="uS", ge=0, doc="interplicate gap-junction conductance of one face")
    G_c: float = key(0.062, unit="uS", ge=0, doc="combined-plicate gap-junction conductance of one face")
    depth: float = key(8.0, unit="um", gt=0, doc="sheet depth d of a 1D/2D grid (a volume is h x h x d; "
                                                 "3D grids use their own z spacing)")
    junction_treatment: str = key("direct", choices=("direct", "series"),
                                  doc="direct: a junction face conducts G; series: G in series with half a volume "
                                      "of cytoplasm on either side (1/g = 1/G + 1/(sigma_c·d))")
    cell_length: int = key(12, ge=1, doc="myocyte length along x, in volumes (12 x 8 um = 96 um)")
    cell_width: int = key(2, ge=1, doc="myocyte width along y (and height along z in 3D), in volumes")
    row_offset: int = key(-1, ge=-1, doc="shift of each row of myocytes against the one below, in volumes; "
                                         "-1: cell_length / 2 (brick wall), 0: aligned ends")
    random_offset: bool = key(False, doc="draw each row's shift from 0 ... cell_length - 1 (from seed) instead")
    disc_zone: int = key(1, ge=0, doc="lateral faces within this many volumes of a myocyte's end are disc faces "
                                      "(junction.lateral_disc)")
    seed: int = key(0, ge=0, doc="seeds every random choice (row shifts, junction noise and dropout, fibrosis); "
                                 "the layout does not depend on the number of ranks")
    layout_file: str = key("", doc="layout read from a .npz instead of generated: cell_id (int, shape (ny, nx) "
                                   "or (nx,), x fastest; < 0: non-conducting) and optionally face_x, face_y (face "
                                   "type codes, docs/user/microscopic.md); or an earlier run's .h5 (its /tissue)")
    junction: Junctions = key(factory=Junctions)
    fibrosis: Fibrosis = key(factory=Fibrosis)
    regions: list[JunctionRegion] = key(factory=list, doc="[[tissue.microscopic.regions]]: factors on G_p, G_i "
                                                          "and G_c in boxes/spheres (regions multiply)")


@dataclass(kw_only=True)
class Tissue:
    model: str = key("homogeneous", choices=("homogeneous", "microscopic"),
                     doc="homogeneous: conductivity tensors on the vertex-centred grid; microscopic: myocytes "
                         "resolved on a cell-centred grid of volumes with per-face conductances "
                         "([tissue.microscopic], docs/user/microscopic.md); sigma_il/sigma_it are then unused and "
                         "sigma_el/sigma_et are the extracellular faces' conductivity (bidomain)")
    microscopic: Microscopic = key(factory=Microscopic)
    chi: float = key(1400.0, unit="cm^-1", gt=0, doc="membrane surface-to-volume ratio χ")
    Cm: float = key(1.0, unit="uF/cm^2", gt=0, doc="membrane capacitance per area")
    sigma_il: float = key(1.74, unit="mS/cm", gt=0, doc="intracellular conductivity along fibres")
    sigma_it: float = key(0.19, unit="mS/cm", gt=0, doc="intracellular conductivity across fibres")
    sigma_el: float = key(6.25, unit="mS/cm", gt=0, doc="extracellular conductivity along fibres")
    sigma_et: float = key(2.36, unit="mS/cm", gt=0, doc="extracellular conductivity across fibres")
    fibre_angle: float = key(0.0, unit="deg", ge=-360, le=360,
                             doc="uniform fibre direction: angle from the x axis in the x-y plane")
    fibre_file: str = key("", doc="per-point fibre directions: .npy of shape (nz, ny, nx, dim) or (n_points, dim) "
                                  "in x-fastest order; overrides fibre_angle")
    conductivity_file: str = key("", doc="per-point factor on σi and σe: .npy of shape (nz, ny, nx) or (n_points,)")
    label_file: str = key("", doc="tissue inside the box: per-point labels, .npy of whole numbers of shape (nz, ny, "
                                  "nx) or (n_points,); 0: no tissue, > 0: tissue. Elements with a corner outside "
                                  "are left out, so the tissue surface is no-flux "
                                  "(docs/decisions/0028-tissue-inside-the-box.md)")
    regions: list[ConductivityRegion] = key(factory=list,
                                            doc="[[tissue.regions]]: conductivity factors in boxes/spheres")
    solve_on: str = key("auto", choices=("auto", "tissue", "box"),
                        doc="with label_file, where the linear systems are solved: tissue: on the tissue nodes only "
                            "(the CPU placements: PETSc submatrices, the elliptic system with algebraic multigrid); "
                            "box: on every node of the box (geometric multigrid); auto: tissue where the tissue "
                            "fills less than half the box and no solver option asks for a grid multigrid (PCMG, "
                            "cardiosim's stencil solvers) (the LV, 19 %, 5.5x faster; a disc, 75 %, 1.7x slower: "
                            "docs/decisions/0029-tissue-only-solves-on-the-cpu.md). The resident placement's solvers "
                            "work on boxes and always take the box")


@dataclass(kw_only=True)
class CellRegion(Region):
    model: str = key("", doc="another cell model in the region (a name or a CellML file; empty: cell.model); its "
                             "cells take this region's variant and parameters only (cell.variant, parameters, "
                             "scale, initial and initial_state are cell.model's)")
    variant: str = key("", doc="the model's variant in the region (empty: cell.variant)")
    parameters: dict[str, float] = key(factory=dict, doc="parameter overrides in the region, by name in the model's "
                                                         "units, applied over cell.parameters")


@dataclass(kw_only=True)
class Cell:
    model: str = key("mitchell-schaeffer", doc="cell model (see `cardiosim cell --list`), or a CellML file "
                                               "(*.cellml; generated with Myokit, docs/user/cell-models.md)")
    variant: str = key("", doc="model variant, e.g. bondarenko: apical | septal")
    parameters: dict[str, float] = key(factory=dict, doc="parameter overrides by name, in the model's units")
    scale: dict[str, float] = key(factory=dict, doc="parameter scale factors by name (e.g. { GKr_b = 0.5 }: half "
                                                    "I_Kr, drug block), applied to the value the variant, "
                                                    "cell.parameters or a region gives, in every cell")
    initial: dict[str, float] = key(factory=dict, doc="initial-state overrides by state name")
    backend: str = key("auto", choices=("auto", "numpy", "native", "cuda"),
                       doc="which integrator: numpy (the reference), native (the model's C kernel compiled with "
                           "gcc; Bondarenko, TT06), cuda (the fused GPU kernel; needs PyCUDA and a GPU), auto: "
                           "native where the model has a C kernel, else numpy")
    placement: str = key("auto", choices=("auto", "cpu", "grouped", "per-rank", "resident"),
                         doc="which rank integrates which cells: cpu (every rank its own, numpy/native), grouped "
                             "(the lowest rank of a group integrates the group's cells: one group per visible GPU "
                             "with cuda, cell.groups_per_node with numpy/native), per-rank (every rank its own "
                             "context on GPU node rank mod GPUs; cuda only), resident (one rank per GPU: the PDE "
                             "and the cells on that GPU, no host copies per step; cuda); auto: grouped with cuda, "
                             "else cpu")
    share_gpu: bool = key(False, doc="resident: let more ranks than GPUs share the node's GPUs (node rank mod "
                                     "GPUs); for tests on a one-GPU machine, slower than one rank per GPU")
    exchange: str = key("vm", choices=("vm", "full"),
                        doc="grouped: what crosses between the ranks and the group's owner each PDE step: vm "
                            "(16 B per cell), full (every state, as the seed simulator did)")
    groups_per_node: int = key(1, ge=1,
                               doc="grouped with a CPU integrator (numpy/native): groups per node (at most one per "
                                   "rank); with cuda the number of visible GPUs decides")
    integrator: str = key("forward-euler", choices=("forward-euler", "rush-larsen", "grl1"),
                          doc="method of each ODE substep: forward-euler, rush-larsen (the gating variables "
                              "updated exactly for frozen V, the rest by Forward Euler; models with gates: tt06 and "
                              "CellML models), or grl1 (the gates as rush-larsen, every other state by its own "
                              "linearisation; CellML models; docs/user/cell-models.md says which for which model)")
    initial_state: str = key("", doc="start every cell from a paced state: the HDF5 file of a `cardiosim cell` run "
                                     "of this model (its last sample; e.g. after --prepace); cell.initial overrides "
                                     "single states of it")
    regions: list[CellRegion] = key(factory=list,
                                    doc="[[cell.regions]]: another variant or other parameters of the model, or "
                                        "another model, in boxes, spheres, labels or coordinate ranges of "
                                        "tissue.label_file (e.g. endo-, mid- and epicardial cells); a node takes the "
                                        "last region that holds it, else cell.model, cell.variant and "
                                        "cell.parameters")
    kernel: str = key("fused", choices=tuple(kernel_variants.VARIANTS),
                      doc="CUDA kernel variant (backend = cuda): fused (k substeps per launch), or one of the seed's "
                          "study (original, lean-registers, no-aux, constant-memory, all; one substep per launch; "
                          "bondarenko only). Same results; see docs/performance.md")

    def model_of(self, region: CellRegion | None) -> str:
        """The cell model of a region's cells (None: the cells in no region)."""
        return (region.model if region is not None and region.model else self.model)

    def models(self) -> list[str]:
        """The run's cell models: cell.model first, then the regions' other models in the order they first appear
        (the cells of each are one ModelCells: cardiosim.reaction.multimodel)."""
        out = [self.model]
        for r in self.regions:
            if self.model_of(r) not in out:
                out.append(self.model_of(r))
        return out


@dataclass(kw_only=True)
class Stimulus(Region):
    name: str = key("", doc="label used in messages and output")
    start: float = key(0.0, unit="ms", ge=0, doc="onset of the first pulse: a whole number of ODE steps "
                                                  "(simulation.dt / ode_substeps)")
    duration: float = key(1.0, unit="ms", gt=0, doc="pulse length: a whole number of ODE steps, so that the charge "
                                                    "delivered is the charge asked for")
    period: float = key(0.0, unit="ms", ge=0, doc="pulse period (0: a single pulse): a whole number of ODE steps")
    count: int = key(1, ge=0, doc="number of pulses (0: unlimited)")
    current_density: float = key(None, unit="uA/cm^2",
                                 doc="current per membrane area; ionic sign convention: NEGATIVE depolarises")
    current_per_volume: float = key(None, unit="uA/cm^3",
                                    doc="current per tissue volume (= current_density·χ); negative depolarises")


@dataclass(kw_only=True)
class Probe:
    name: str = key(doc="label of the trace in the output (/probes/<name>): letters, digits, '_', '-', '.'; "
                        "not 'time'")
    position: list[float] = key(unit="cm", length=(1, 3), doc="point; the nearest node is recorded")


@dataclass(kw_only=True)
class Electrode:
    name: str = key(doc="label of the trace in the output (/ecg/<name>): letters, digits, '_', '-', '.'")
    position: list[float] = key(unit="cm", length=(1, 3), doc="point in the bath, at least one grid spacing from "
                                                             "every tissue node (a 2D sheet lies in z = 0)")


@dataclass(kw_only=True)
class Lead:
    name: str = key(doc="label of the trace in the output (/ecg/<name>)")
    plus: str = key("", doc="electrode name: the lead is φ(plus) − φ(minus)")
    minus: str = key("", doc="electrode name")
    weights: dict[str, float] = key(factory=dict, doc="instead of plus and minus: the lead is Σ weight·φ(electrode), "
                                                      "e.g. aVR = {RA = 1.0, LA = -0.5, LL = -0.5}, V1 against "
                                                      "Wilson's terminal = {V1 = 1.0, RA = -0.333.., ...}")

    def combination(self) -> dict[str, float]:
        """The lead as {electrode: weight}."""
        return dict(self.weights) if self.weights else {self.plus: 1.0, self.minus: -1.0}

    def formula(self) -> str:
        """The lead as text, e.g. 'LA - RA' or '1 RA - 0.5 LA - 0.5 LL'."""
        if not self.weights:
            return f"{self.plus} - {self.minus}"
        terms = [f"{'-' if w < 0 else '+'} {abs(w):g} {n}" for n, w in self.weights.items()]
        return " ".join(terms).lstrip("+ ")


@dataclass(kw_only=True)
class Ecg:
    bath_conductivity: float = key(2.0, unit="mS/cm", gt=0, doc="σ_b of the infinite homogeneous volume conductor "
                                                                "around the tissue (torso ≈ 2)")
    sheet_thickness: float = key(0.0, unit="cm", ge=0, doc="2D: the sheet's thickness (1D: the cable's side); 0: "
                                                          "one grid spacing")
    electrodes: list[Electrode] = key(factory=list, doc="[[ecg.electrodes]]: pseudo-ECG potentials, every PDE step")
    leads: list[Lead] = key(factory=list, doc="[[ecg.leads]]: differences of two electrodes (or weighted sums of "
                                               "electrodes), every PDE step")
    twelve_lead: str = key("", choices=("", "lv", "biv", "human-lv", "human-biv", "electrodes"),
                           doc="the standard 12 leads (I, II, III, aVR, aVL, aVF, V1-V6) and Wilson's terminal (WCT) "
                               "added to ecg.leads: lv, biv: with electrodes RA, LA, LL, C1-C6 added at positions "
                               "round the anatomy of cardiosim geometry lv or biv (its frame; an adult torso's, "
                               "scaled: cardiosim/analysis/twelve_lead.py); human-lv, human-biv: round that of "
                               "cardiosim geometry lv or biv --size human (the adult torso unscaled); electrodes: at "
                               "the config's own electrodes of those names")


@dataclass(kw_only=True)
class Output:
    path: str = key("", doc="HDF5 file; default out/<config name>.h5 (relative to the working directory); a "
                            "relative path written in the config file is relative to the config file's folder")
    interval: float = key(1.0, unit="ms", gt=0, doc="time between field snapshots: a whole number of "
                                                       "simulation.dt")
    fields: list[str] = key(factory=lambda: ["Vm", "phi_e"], choices=("Vm", "phi_e"),
                            doc="fields stored in snapshots (phi_e only with bidomain)")
    states: list[str] = key(factory=list, doc="cell-model states, and intermediates of CellML models (currents, "
                                              "fluxes: computed from the states at the recorded Vm, without the "
                                              "stimulus), stored like a field, in snapshots (/fields/<name>) "
                                              "and at every probe (/probes/<probe>/<name>), in the model's units, "
                                              "e.g. [\"Cai\", \"i_Na\"] (cardiosim cell --list, cardiosim model "
                                              "info); cell.placement = 'cpu' only")
    activation_threshold: float = key(0.0, unit="mV",
                                      doc="activation time map (/maps/activation_time): first upward crossing of "
                                          "this potential, interpolated within the step")
    apd_level: float = key(90.0, unit="%", gt=0, lt=100,
                           doc="APD map (/maps/apd): first beat, from activation until V falls below "
                               "V_rest + (1 − level/100)·(V_peak − V_rest); 90 gives APD90")


@dataclass(kw_only=True)
class Checkpoint:
    path: str = key("", doc="checkpoint file (HDF5, replaced atomically); default: beside the output, "
                            "<output name>.ckpt.h5 (docs/user/checkpoints.md)")
    interval: float = key(0.0, unit="ms", ge=0, doc="simulated time between checkpoints (0: none): a whole number "
                                                       "of simulation.dt")
    wall_interval: float = key(0.0, unit="s", ge=0, doc="wall time between checkpoints, measured on rank 0 (0: none)")
    on_signal: bool = key(True, doc="on SIGTERM or SIGUSR1 (e.g. SLURM --signal), write a checkpoint at the next "
                                    "step and stop with exit status 75")


@dataclass(kw_only=True)
class Checks:
    min_activated: float = key(checks.DEFAULTS["min_activated"], ge=0, le=1,
                               doc="warn at the end of a run where a smaller share of the tissue's nodes activated "
                                   "(0: no check; cardiosim/analysis/checks.py)")
    min_velocity: float = key(checks.DEFAULTS["min_velocity"], unit="m/s", ge=0,
                              doc="warn where the apparent conduction velocity (straight-line distance / activation "
                                  "delay, median) is lower (0: no check)")
    max_qrs: float = key(checks.DEFAULTS["max_qrs"], unit="ms", ge=0,
                         doc="runs with [ecg]: warn where the total activation time (the QRS) is longer (0: no check)")


@dataclass(kw_only=True)
class PurkinjeTree:
    segment: float = key(grow.GrowParameters.segment, unit="cm", gt=0,
                         doc="growth step: the spacing of the grown nodes along a branch")
    his_length: float = key(grow.GrowParameters.his_length, unit="cm", gt=0,
                            doc="the His bundle: a straight segment from the root towards the apex")
    bundle_length: float = key(grow.GrowParameters.bundle_length, unit="cm", gt=0,
                               doc="each bundle branch down its side of the septum")
    fascicle_length: float = key(grow.GrowParameters.fascicle_length, unit="cm", gt=0, doc="each fascicle")
    lv_fascicles: list[float] = key(factory=lambda: list(grow.GrowParameters.lv_fascicles), unit="deg",
                                    doc="the left fascicles' angles from the left bundle's direction")
    rv_fascicles: list[float] = key(factory=lambda: list(grow.GrowParameters.rv_fascicles), unit="deg",
                                    doc="the right fascicles' angles from the right bundle's direction")
    branch_length: float = key(grow.GrowParameters.branch_length, unit="cm", gt=0,
                               doc="a fractal branch's length (± length_jitter)")
    branch_angle: float = key(grow.GrowParameters.branch_angle, unit="deg", ge=0, le=90,
                              doc="each child branch from its parent's direction (± angle_jitter)")
    length_jitter: float = key(grow.GrowParameters.length_jitter, ge=0, lt=1,
                               doc="relative spread of branch lengths (uniform)")
    angle_jitter: float = key(grow.GrowParameters.angle_jitter, unit="deg", ge=0, doc="spread of the angles (uniform)")
    generations: int = key(grow.GrowParameters.generations, ge=0, doc="splits of the fractal trees at most")
    spacing: float = key(grow.GrowParameters.spacing, unit="cm", gt=0,
                         doc="a branch stops where it would come this close to another: the terminals' spacing")
    repulsion: float = key(grow.GrowParameters.repulsion, ge=0,
                           doc="weight turning a branch away from the nearest other branch")
    apex_direction: list[float] = key(factory=lambda: list(grow.GrowParameters.apex_direction), length=(3, 3),
                                      doc="from the base towards the apex, in the geometry's frame")
    seed: int = key(grow.GrowParameters.seed, ge=0, doc="the random numbers' seed: one seed, one network")
    block: list[str] = key(factory=list, choices=grow.BLOCKS,
                           doc="bundle branches cut where they leave the His bundle (a bundle-branch block: "
                               "\"lbb\" left, \"rbb\" right; not both), with all they feed as block_distal says; "
                               "the rest of the network is the unblocked one's, node for node")
    block_distal: str = key(grow.GrowParameters.block_distal, choices=grow.BLOCK_DISTAL,
                            doc="a cut branch and all it feeds: \"drop\" leaves them out, \"retrograde\" keeps "
                                "them, detached at the cut, to be activated backwards from the myocardium through "
                                "their PMJs")


@dataclass(kw_only=True)
class PurkinjeStimulus:
    start: float = key(0.0, unit="ms", ge=0, doc="onset of the first pulse")
    duration: float = key(2.0, unit="ms", gt=0, doc="pulse length")
    period: float = key(0.0, unit="ms", ge=0, doc="pulse period (0: a single pulse)")
    count: int = key(1, ge=0, doc="number of pulses (0: unlimited)")
    current_density: float = key(-100.0, unit="uA/cm^2", doc="current per membrane area; NEGATIVE depolarises")
    radius: float = key(0.05, unit="cm", ge=0, doc="the network's nodes within this distance of the root")


@dataclass(kw_only=True)
class Purkinje:
    network: str = key("", doc="the network: a .vtp, .vtu or .vtk file of polylines (cardiosim/purkinje/network.py "
                               "says what is read: root, pmj and radius point data)")
    grow: bool = key(False, doc="instead of network: grow one ([purkinje.tree]) on the LV and RV endocardia of "
                                "tissue.label_file (a geometry file of cardiosim geometry)")
    units: str = key("cm", choices=("um", "mm", "cm"), doc="the network file's length unit")
    root: list[float] = key(factory=list, unit="cm", doc="the His bundle's origin: where a network file marks no "
                                                         "root, its nearest node; grown: the point (default: half-way "
                                                         "across the septum near the base)")
    spacing: float = key(0.01, unit="cm", gt=0, doc="the cable's node spacing: edges cut to at most this")
    model: str = key("", doc="the network's cell model (a name or a CellML file); empty: "
                             "models/aslanidi_Purkinje_model_2009.cellml")
    parameters: dict[str, float] = key(factory=dict, doc="parameter overrides of that model, by name")
    integrator: str = key("rush-larsen", choices=("forward-euler", "rush-larsen", "grl1"),
                          doc="as cell.integrator, for the network's cells")
    sigma: float = key(10.0, unit="mS/cm", gt=0, doc="the cable's conductivity")
    radius: float = key(0.003, unit="cm", gt=0, doc="the cable's radius where the network file gives none")
    chi: float = key(0.0, unit="cm^-1", ge=0, doc="the cable's membrane per volume; 0: the cylinder's surface, "
                                                 "2/radius")
    Cm: float = key(1.0, unit="uF/cm^2", gt=0, doc="the cable's membrane capacitance")
    fibres: float = key(1.0, gt=0, doc="each edge a bundle of this many parallel fibres: membrane and conductance "
                                       "times it, the velocity the same, N times the current a terminal gives the "
                                       "tissue (a 3D tissue's nodes are large sinks: a grown network on the built-in "
                                       "BiV at 0.1 cm activates it with about 1000)")
    pmj_resistance: float = key(100.0, unit="kOhm", gt=0,
                                doc="each PMJ's resistance: I = (V_p − V_m)/R from a terminal into the tissue")
    pmj_radius: float = key(0.1, unit="cm", gt=0, doc="a PMJ spreads over the tissue nodes within this distance of "
                                                      "its terminal (by volume)")
    pmj_depth: float = key(0.0, unit="cm", ge=0, doc="1D/2D tissue: the extent the grid does not have (a node's "
                                                     "volume is M·depth^(3−d)); 0: one grid spacing")
    stimulus: PurkinjeStimulus = key(factory=PurkinjeStimulus, doc="[purkinje.stimulus]: the His bundle's stimulus")
    tree: PurkinjeTree = key(factory=PurkinjeTree, doc="[purkinje.tree]: the grown network's parameters")

    @property
    def enabled(self) -> bool:
        """A network is given or grown: the run has a conduction system."""
        return bool(self.network) or self.grow


@dataclass(kw_only=True)
class Config:
    simulation: Simulation
    grid: Grid
    tissue: Tissue = key(factory=Tissue)
    cell: Cell = key(factory=Cell)
    stimulus: list[Stimulus] = key(factory=list, doc="[[stimulus]] tables")
    probe: list[Probe] = key(factory=list, doc="[[probe]] tables: Vm/φe traces every PDE step")
    ecg: Ecg = key(factory=Ecg, doc="pseudo-ECG (cardiosim/analysis/ecg.py)")
    output: Output = key(factory=Output)
    checkpoint: Checkpoint = key(factory=Checkpoint)
    checks: Checks = key(factory=Checks, doc="plausibility of a finished run: warnings (cardiosim/analysis/checks.py)")
    purkinje: Purkinje = key(factory=Purkinje, doc="[purkinje]: the conduction system, a Purkinje network coupled "
                                                   "to the tissue (cardiosim/purkinje/); monodomain or bidomain, "
                                                   "any number of ranks, every cell.placement but resident")
    # Not keys: where the config came from, kept for the output file.
    source_text: str = field(default="", repr=False, metadata={"internal": True})
    source_name: str = field(default="config", repr=False, metadata={"internal": True})
    source_path: str = field(default="", repr=False, metadata={"internal": True})
    resolved: list = field(default_factory=list, repr=False, metadata={"internal": True})  # keys made relative to it
    overrides: list = field(default_factory=list, repr=False, metadata={"internal": True})  # --set, as given
    effective_text: str = field(default="", repr=False, metadata={"internal": True})  # the config with them applied

    @property
    def dim(self) -> int:
        return len(self.grid.size)


# --------------------------------------------------------------------------------------------------------------
# Reading the declarations
# --------------------------------------------------------------------------------------------------------------
def is_section(tp) -> bool:
    """A type that is a section (a dataclass of keys), not a value."""
    return dataclasses.is_dataclass(tp)


def describe_type(tp) -> str:
    """A key's type in words, as messages and the reference say it."""
    origin = typing.get_origin(tp)
    if origin is list:
        (inner,) = typing.get_args(tp)
        return "a table array" if is_section(inner) else f"a list of {describe_type(inner)}s"
    if origin is dict:
        return "a table of numbers"
    return {float: "number", int: "integer", str: "string", bool: "true/false"}.get(tp, "table")


def format_value(value) -> str:
    """A value as messages and the reference show it: strings quoted, true/false as in TOML."""
    return repr(value) if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")


def keys_of(cls):
    """[(field, type)] of a section's keys, in declaration order (not the internal fields of Config)."""
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


# The dataset a key reads from an HDF5 file of cardiosim geometry (cardiosim.domain.grid reads them by the same names).
H5_DATASETS = {"fibre_file": "fibres", "conductivity_file": "conductivity", "label_file": "labels"}
