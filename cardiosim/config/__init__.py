"""Run configuration: a TOML file validated into typed, unit-annotated sections.

Every key is declared once, below, with its type, default, unit, allowed values and a line of documentation;
validation, ``--set`` overrides and the key reference (``cardiosim config --doc``, docs/config.md) all read the
same declarations. Errors name the key by its dotted path and say what is allowed::

    config error: grid.spacing: must be > 0 (cm); got -0.01

Units are part of the key's declaration and appear in the reference: lengths in cm, times in ms, potentials in
mV, conductivities in mS/cm, capacitance in µF/cm², surface-to-volume ratio in cm⁻¹, currents in µA/cm² (per
membrane area) or µA/cm³ (per tissue volume).
"""

from __future__ import annotations

import dataclasses
import math
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib


from cardiosim.analysis import checks
from cardiosim.runtime import files
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
    ode_substeps: int = key(1, ge=1, le=1_000_000, doc="Forward-Euler substeps k per PDE step: Δt_o = dt / k")
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
                                   "type codes, docs/microscopic.md); or an earlier run's .h5 (its /tissue)")
    junction: Junctions = key(factory=Junctions)
    fibrosis: Fibrosis = key(factory=Fibrosis)
    regions: list[JunctionRegion] = key(factory=list, doc="[[tissue.microscopic.regions]]: factors on G_p, G_i "
                                                          "and G_c in boxes/spheres (regions multiply)")


@dataclass(kw_only=True)
class Tissue:
    model: str = key("homogeneous", choices=("homogeneous", "microscopic"),
                     doc="homogeneous: conductivity tensors on the vertex-centred grid; microscopic: myocytes "
                         "resolved on a cell-centred grid of volumes with per-face conductances "
                         "([tissue.microscopic], docs/microscopic.md); sigma_il/sigma_it are then unused and "
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
                            "cardiosim's stencil solvers) (docs/performance.md: the LV, 19 %, 5.5x faster; a disc, "
                            "75 %, 1.7x slower). The resident placement's solvers work on boxes and always take the "
                            "box")


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
                                               "(*.cellml; generated with Myokit, docs/cell-models.md)")
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
                              "linearisation; CellML models; docs/cell-models.md says which for which model)")
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
        (one cell population each: cardiosim.reaction.multimodel)."""
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
    twelve_lead: str = key("", choices=("", "lv", "biv", "electrodes"),
                           doc="the standard 12 leads (I, II, III, aVR, aVL, aVF, V1-V6) and Wilson's terminal (WCT) "
                               "added to ecg.leads: lv, biv: with electrodes RA, LA, LL, C1-C6 added at positions "
                               "round the anatomy of cardiosim geometry lv or biv (its frame; an adult torso's, "
                               "scaled: cardiosim/analysis/twelve_lead.py); electrodes: at the config's own electrodes of "
                               "those names")


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
                            "<output name>.ckpt.h5 (docs/checkpoints.md)")
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
# Building sections from TOML data
# --------------------------------------------------------------------------------------------------------------
def _is_section(tp) -> bool:
    return dataclasses.is_dataclass(tp)


def _describe(tp) -> str:
    origin = typing.get_origin(tp)
    if origin is list:
        (inner,) = typing.get_args(tp)
        return "a table array" if _is_section(inner) else f"a list of {_describe(inner)}s"
    if origin is dict:
        return "a table of numbers"
    return {float: "number", int: "integer", str: "string", bool: "true/false"}.get(tp, "table")


def _fmt(value) -> str:
    return repr(value) if isinstance(value, str) else str(value).replace("True", "true").replace("False", "false")


def _check_number(path, v, meta, unit):
    u = f" ({unit})" if unit else ""
    for op, name, ok in (("gt", ">", lambda a, b: a > b), ("ge", ">=", lambda a, b: a >= b),
                         ("lt", "<", lambda a, b: a < b), ("le", "<=", lambda a, b: a <= b)):
        bound = meta.get(op)
        if bound is not None and not ok(v, bound):
            raise ConfigError(f"{path}: must be {name} {bound}{u}; got {_fmt(v)}")
    if isinstance(v, float) and not math.isfinite(v):
        raise ConfigError(f"{path}: must be a finite number{u}; got {v}")


def _convert(path, value, tp, meta):
    """Check ``value`` (from TOML) against type ``tp``; return it converted."""
    unit = meta.get("unit", "")
    origin = typing.get_origin(tp)
    if _is_section(tp):
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: must be a table; got {_fmt(value)}")
        return _build(tp, value, path)
    if origin is list:
        (inner,) = typing.get_args(tp)
        if inner is float and isinstance(value, (int, float)) and not isinstance(value, bool):
            value = [value]  # one number where a vector is allowed: the same in every dimension
        if not isinstance(value, list):
            raise ConfigError(f"{path}: must be {_describe(tp)}; got {_fmt(value)}")
        lo, hi = meta.get("length") or (0, math.inf)
        if not lo <= len(value) <= hi:
            raise ConfigError(f"{path}: must have {lo} to {hi} entries; got {len(value)}")
        return [_convert(f"{path}[{i}]", v, inner, {} if _is_section(inner) else meta)
                for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{path}: must be a table of name = number; got {_fmt(value)}")
        return {k: _convert(f"{path}.{k}", v, float, {}) for k, v in value.items()}
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{path}: must be a number{f' ({unit})' if unit else ''}; got {_fmt(value)}")
        value = float(value)
        _check_number(path, value, meta, unit)
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{path}: must be an integer; got {_fmt(value)}")
        _check_number(path, value, meta, unit)
        return value
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{path}: must be a string; got {_fmt(value)}")
        choices = meta.get("choices")
        if choices and value not in choices:
            raise ConfigError(f"{path}: '{value}' is not allowed; allowed: {', '.join(choices)}")
        return value
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{path}: must be true or false; got {_fmt(value)}")
        return value
    raise TypeError(f"unsupported config type {tp}")  # pragma: no cover - a schema bug, not a user mistake


def _keys(cls):
    hints = typing.get_type_hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls) if not f.metadata.get("internal")]


def _build(cls, data: dict, path: str):
    known = {f.name for f, _ in _keys(cls)}
    for name in data:
        if name not in known:
            where = f"{path}.{name}" if path else name
            hint = _closest(name, known)
            raise ConfigError(f"{where}: unknown key{f' (did you mean {hint}?)' if hint else ''}; "
                              f"allowed in {path or 'the top level'}: {', '.join(sorted(known))}")
    kwargs = {}
    for f, tp in _keys(cls):
        where = f"{path}.{f.name}" if path else f.name
        if f.name in data:
            value = data[f.name]
            if value is None:
                kwargs[f.name] = None
            else:
                meta = dict(f.metadata)
                if typing.get_origin(tp) is list and meta.get("choices"):
                    for i, v in enumerate(value if isinstance(value, list) else [value]):
                        if v not in meta["choices"]:
                            raise ConfigError(f"{where}[{i}]: '{v}' is not allowed; "
                                              f"allowed: {', '.join(meta['choices'])}")
                kwargs[f.name] = _convert(where, value, tp, meta)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: missing; {f.metadata.get('doc', '')}"
                              f"{' (' + f.metadata['unit'] + ')' if f.metadata.get('unit') else ''}")
    return cls(**kwargs)


def _closest(name, candidates):
    import difflib
    m = difflib.get_close_matches(name, list(candidates), n=1, cutoff=0.6)
    return m[0] if m else None


# --------------------------------------------------------------------------------------------------------------
# Cross-key checks: what no single key's declaration can say
# --------------------------------------------------------------------------------------------------------------
def _check_coordinate_region(path: str, r: Region, label_file: str):
    """A region by a ventricular coordinate: the label file is a geometry file that has that coordinate."""
    if not label_file:
        raise ConfigError(f"{path}.shape: 'coordinate' needs tissue.label_file to be a cardiosim geometry file with "
                          f"ventricular coordinates (cardiosim geometry lv|biv, or geometry fibres); use 'box' or "
                          f"'sphere'")
    if r.coordinate is None:
        raise ConfigError(f"{path}.coordinate: missing; one of {', '.join(COORDINATES)}")
    if r.range is None:
        raise ConfigError(f"{path}.range: missing; [lower, upper] of the coordinate (e.g. [0.0, 0.3])")
    lo, hi = r.range
    if not lo <= hi:
        raise ConfigError(f"{path}.range: lower must be <= upper; got [{lo}, {hi}]")
    for name in ("lower", "upper", "center", "radius", "label"):
        if getattr(r, name) is not None:
            raise ConfigError(f"{path}.{name}: not used by a coordinate region; give coordinate and range only")
    if not str(label_file).endswith((".h5", ".hdf5")):
        raise ConfigError(f"{path}.coordinate: tissue.label_file {label_file} is not a geometry file (.h5); "
                          f"coordinates come from cardiosim geometry lv|biv or geometry fibres")
    files.check_array_file(f"{path}.coordinate", label_file, r.coordinate)


def _check_region(path: str, r: Region, dim: int, labels: bool = False):
    """``labels``: the run has a label image (tissue.label_file), so shape = 'label' is allowed."""
    def vec(name):
        v = getattr(r, name)
        if v is None:
            raise ConfigError(f"{path}.{name}: missing; a {r.shape} needs it ({dim} numbers, cm)")
        if len(v) != dim:
            raise ConfigError(f"{path}.{name}: must have {dim} entries (one per grid dimension); got {len(v)}")
        return v

    if r.shape == "coordinate":
        _check_coordinate_region(path, r, labels)
        return
    for name in ("coordinate", "range"):
        if getattr(r, name) is not None:
            raise ConfigError(f"{path}.{name}: only for shape = 'coordinate'")
    if r.shape == "label":
        if not labels:
            raise ConfigError(f"{path}.shape: 'label' needs a label image (tissue.label_file); use 'box' or 'sphere'")
        if r.label is None:
            raise ConfigError(f"{path}.label: missing; a label region needs the label value (a whole number >= 1)")
        for name in ("lower", "upper", "center", "radius"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a label region; give label only")
        return
    if r.label is not None:
        raise ConfigError(f"{path}.label: only for shape = 'label'")
    if r.shape == "box":
        lo, hi = vec("lower"), vec("upper")
        for i, (a, b) in enumerate(zip(lo, hi)):
            if not a <= b:
                raise ConfigError(f"{path}.upper[{i}]: must be >= lower[{i}] = {a} (cm); got {b}")
        for name in ("center", "radius"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a box; use lower and upper")
    else:
        vec("center")
        if r.radius is None:
            raise ConfigError(f"{path}.radius: missing; a sphere needs it (cm, > 0)")
        for name in ("lower", "upper"):
            if getattr(r, name) is not None:
                raise ConfigError(f"{path}.{name}: not used by a sphere; use center and radius")



def _check_microscopic(cfg) -> None:
    """What the microscopic model needs of the other sections (docs/microscopic.md)."""
    m = cfg.tissue.microscopic
    if cfg.grid.stencil == "box":
        raise ConfigError("grid.stencil: the microscopic model has its own 3/5/7-point face stencil; use 'auto' "
                          "or 'star'")
    t = cfg.tissue
    if cfg.grid.origin and any(cfg.grid.origin):
        raise ConfigError("grid.origin: the microscopic model's layout and regions start at 0; leave origin out")
    if t.fibre_angle != 0.0 or t.fibre_file or t.conductivity_file or t.regions or t.label_file:
        raise ConfigError("tissue: the microscopic model takes its conductances from the myocyte layout "
                          "([tissue.microscopic]); fibre_angle, fibre_file, conductivity_file, label_file and "
                          "regions are for tissue.model = 'homogeneous'")
    for i, r in enumerate(m.regions):
        _check_region(f"tissue.microscopic.regions[{i}]", r, cfg.dim)
    if m.row_offset >= m.cell_length:
        raise ConfigError(f"tissue.microscopic.row_offset: must be -1 (cell_length / 2) or 0 ... cell_length - 1 "
                          f"= {m.cell_length - 1} volumes; got {m.row_offset}")
    if 2 * m.disc_zone > m.cell_length and m.cell_length > 1:
        raise ConfigError(f"tissue.microscopic.disc_zone: must be <= cell_length / 2 = {m.cell_length / 2:g} "
                          f"volumes; got {m.disc_zone}")
    if m.layout_file:
        files.check_input("tissue.microscopic.layout_file", m.layout_file,
                          hint=_relative_hint(cfg, "tissue.microscopic.layout_file"))
        if m.fibrosis.fraction or m.random_offset:
            raise ConfigError("tissue.microscopic.layout_file: a layout read from a file sets the myocytes; "
                              "fibrosis.fraction and random_offset are for generated layouts (mark "
                              "non-conducting cells with cell_id < 0 in the file)")


def _check_ecg(cfg) -> None:
    e = cfg.ecg
    if e.twelve_lead:
        _add_twelve_leads(cfg)
    if e.leads and not e.electrodes:
        raise ConfigError("ecg.leads: a lead is a difference of two electrodes; give [[ecg.electrodes]] too")
    names = set()
    for kind, items in (("electrodes", e.electrodes), ("leads", e.leads)):
        for i, x in enumerate(items):
            where = f"ecg.{kind}[{i}]"
            _check_probe_name(f"{where}.name", x.name)
            if x.name in names:
                raise ConfigError(f"{where}.name: '{x.name}' is used twice; electrode and lead names must be unique")
            names.add(x.name)
            if kind == "electrodes" and len(x.position) < cfg.dim:
                raise ConfigError(f"{where}.position: must have {cfg.dim} to 3 entries; got {len(x.position)}")
    electrodes = {x.name for x in e.electrodes}
    for i, lead in enumerate(e.leads):
        where = f"ecg.leads[{i}]"
        if bool(lead.weights) == bool(lead.plus or lead.minus):
            raise ConfigError(f"{where}: give either plus and minus (electrode names) or weights "
                              f"({{electrode = weight, ...}}), not {'both' if lead.weights else 'neither'}")
        named = ([(f"{where}.{k}", getattr(lead, k)) for k in ("plus", "minus")] if not lead.weights else
                 [(f"{where}.weights.{n}", n) for n in lead.weights])
        for key_, name in named:
            if name not in electrodes:
                raise ConfigError(f"{key_}: no electrode '{name}'; electrodes: {', '.join(sorted(electrodes))}")


def _add_twelve_leads(cfg) -> None:
    """ecg.twelve_lead: the standard electrodes (lv, biv) and leads added to the config's (cardiosim.analysis.twelve_lead).
    Idempotent: a config validated again finds them already there."""
    from cardiosim.analysis import twelve_lead
    e, mode = cfg.ecg, cfg.ecg.twelve_lead
    electrodes = {x.name: x for x in e.electrodes}
    if mode in twelve_lead.FRAMES:
        if cfg.dim != 3:
            raise ConfigError(f"ecg.twelve_lead: '{mode}' places electrodes round the 3D anatomy of cardiosim "
                              f"geometry {mode}; this grid is {cfg.dim}D (use 'electrodes' with your own)")
        for name, pos in twelve_lead.positions(mode).items():
            if name not in electrodes:
                e.electrodes.append(Electrode(name=name, position=pos))
            elif list(electrodes[name].position) != pos:
                raise ConfigError(f"ecg.twelve_lead: '{mode}' places the electrode {name}, and [[ecg.electrodes]] "
                                  f"has one of that name; rename yours or use twelve_lead = 'electrodes'")
    else:
        missing = [n for n in twelve_lead.ELECTRODES if n not in electrodes]
        if missing:
            raise ConfigError(f"ecg.twelve_lead: 'electrodes' needs [[ecg.electrodes]] named "
                              f"{', '.join(twelve_lead.ELECTRODES)}; missing: {', '.join(missing)}")
    leads = {x.name: x for x in e.leads}
    for name, w in twelve_lead.weights().items():
        if name not in leads:
            pair = sorted(w, key=lambda k: -w[k]) if sorted(w.values()) == [-1.0, 1.0] else None   # I, II, III
            e.leads.append(Lead(name=name, plus=pair[0], minus=pair[1]) if pair else Lead(name=name, weights=w))
        elif leads[name].combination() != w:
            raise ConfigError(f"ecg.twelve_lead: adds the lead {name}, and [[ecg.leads]] has one of that name; "
                              f"rename yours")


PROBE_NAME = re.compile(r"[A-Za-z0-9_.-]+")
# Names /probes/<name> may not take: the probes' time axis, and what HDF5 reads as a path.
RESERVED_PROBE_NAMES = ("time", ".", "..")


def _check_probe_name(where: str, name: str) -> None:
    if not PROBE_NAME.fullmatch(name) or name in RESERVED_PROBE_NAMES:
        raise ConfigError(f"{where}: {name!r} is not allowed; a probe name is a non-empty run of letters, digits, "
                          f"'_', '-' and '.', other than {', '.join(repr(n) for n in RESERVED_PROBE_NAMES)}")


def ode_step(s) -> tuple[float, str]:
    """The ODE substep (ms) the stimuli are sampled at, and how to say it."""
    if s.splitting == "strang":
        half_k = math.ceil(s.ode_substeps / 2)
        return s.dt / (2 * half_k), f"the ODE step simulation.dt / (2·ceil(ode_substeps / 2))"
    return s.dt / s.ode_substeps, "the ODE step simulation.dt / simulation.ode_substeps"


def _whole_steps(where: str, value: float, step: float, what: str) -> None:
    n = value / step
    if round(n) < 1 or abs(n - round(n)) > 1e-9 * max(1.0, n):
        raise ConfigError(f"{where}: {value:g} ms is not a whole number of steps of {what} = {step:g} ms "
                          f"(it would become {max(1, round(n)) * step:g} ms); use a multiple of {step:g} ms")


def validate(cfg: Config) -> Config:
    dim = cfg.dim
    g = cfg.grid
    if len(g.spacing) == 1:
        g.spacing = g.spacing * dim
    if len(g.spacing) != dim:
        raise ConfigError(f"grid.spacing: must have 1 or {dim} entries (grid.size has {dim}); got {len(g.spacing)}")
    for i, (L, h) in enumerate(zip(g.size, g.spacing)):
        n = L / h
        if h > L:
            raise ConfigError(f"grid.spacing[{i}]: must be <= grid.size[{i}] = {L} cm; got {h}")
        if abs(n - round(n)) > 1e-6 * max(1.0, n):
            raise ConfigError(f"grid.spacing[{i}]: size/spacing = {L}/{h} = {n:.6g} is not a whole number "
                              f"of cells; choose a spacing that divides {L} cm")
    if g.origin and len(g.origin) != dim:
        raise ConfigError(f"grid.origin: must have {dim} entries (grid.size has {dim}); got {len(g.origin)}")
    origin = g.origin or [0.0] * dim
    s = cfg.simulation
    if s.dt > s.duration:
        raise ConfigError(f"simulation.dt: must be <= simulation.duration = {s.duration} ms; got {s.dt}")
    ck = cfg.checkpoint
    if 0 < ck.interval < s.dt:
        raise ConfigError(f"checkpoint.interval: must be 0 (none) or >= simulation.dt = {s.dt} ms; got {ck.interval}")
    # Times the run can only honour in whole steps are refused, not rounded: a rounded value is a silently
    # different run.
    _whole_steps("output.interval", cfg.output.interval, s.dt, "simulation.dt")
    if ck.interval > 0:
        _whole_steps("checkpoint.interval", ck.interval, s.dt, "simulation.dt")
    t = cfg.tissue
    for k, dataset in H5_DATASETS.items():
        v = getattr(t, k)
        if v:
            files.check_array_file(f"tissue.{k}", v, dataset, hint=_relative_hint(cfg, f"tissue.{k}"))
    for i, r in enumerate(t.regions):
        _check_region(f"tissue.regions[{i}]", r, dim, labels=t.label_file)
    for i, r in enumerate(cfg.cell.regions):
        _check_region(f"cell.regions[{i}]", r, dim, labels=t.label_file)
    if t.model == "microscopic":
        _check_microscopic(cfg)
    for i, st in enumerate(cfg.stimulus):
        path = f"stimulus[{i}]"
        _check_region(path, st, dim, labels=t.label_file)
        given = [k for k in ("current_density", "current_per_volume") if getattr(st, k) is not None]
        if len(given) != 1:
            raise ConfigError(f"{path}: give exactly one of current_density (uA/cm^2) and current_per_volume "
                              f"(uA/cm^3); got {len(given)}")
        if st.period and st.period < st.duration:
            raise ConfigError(f"{path}.period: must be 0 (single pulse) or >= duration = {st.duration} ms; "
                              f"got {st.period}")
        # The stimulus is sampled once per ODE substep: a pulse that is not a whole number of substeps would be
        # applied for more (or less) time than asked, i.e. another charge.
        ode_dt, what = ode_step(s)
        for k in ("start", "duration", "period"):
            v = getattr(st, k)
            if v or k == "duration":
                _whole_steps(f"{path}.{k}", v, ode_dt, what)
    names = set()
    for i, p in enumerate(cfg.probe):
        if len(p.position) != dim:
            raise ConfigError(f"probe[{i}].position: must have {dim} entries; got {len(p.position)}")
        for d, (x, o, L) in enumerate(zip(p.position, origin, g.size)):
            if not o <= x <= o + L:
                raise ConfigError(f"probe[{i}].position[{d}]: must lie in [{o:g}, {o + L}] cm; got {x}")
        _check_probe_name(f"probe[{i}].name", p.name)
        if p.name in names:
            raise ConfigError(f"probe[{i}].name: '{p.name}' is used twice; probe names must be unique")
        names.add(p.name)
    _check_ecg(cfg)
    seen = set()
    for i, f in enumerate(cfg.output.fields):
        if f in seen:
            raise ConfigError(f"output.fields[{i}]: '{f}' is listed twice; list each field once")
        seen.add(f)
    if "phi_e" in cfg.output.fields and s.equations == "monodomain":
        cfg.output.fields = [f for f in cfg.output.fields if f != "phi_e"]
    from cardiosim import cells  # the model registry knows which names exist
    try:
        cls = cells.model_class(cfg.cell.model)
    except cells.CellModelError as e:
        msg = str(e)
        if not msg.startswith("cell.model"):
            msg = f"cell.model: {msg}" + (" (a relative path in a config file is relative to the config file's "
                                          "folder)" if "cell.model" in cfg.resolved and "no such" in msg else "")
        raise ConfigError(msg) from None
    classes = {cfg.cell.model: cls}           # every model of the run (cell.regions may name others)
    for i, r in enumerate(cfg.cell.regions):
        if cfg.cell.model_of(r) not in classes:
            classes[cfg.cell.model_of(r)] = _region_model_class(cfg, i)
    for name, model_cls in classes.items():
        if cfg.cell.integrator == "rush-larsen" and not hasattr(model_cls, "rush_larsen"):
            raise ConfigError(f"cell.integrator: 'rush-larsen' needs a model with Hodgkin-Huxley gates written for it "
                              f"(tt06, CellML models); {name} has none, use 'forward-euler'")
        if cfg.cell.integrator == "grl1" and not hasattr(model_cls, "grl1"):
            raise ConfigError(f"cell.integrator: 'grl1' is generated for CellML models; {name} is built in, "
                              f"use 'forward-euler'{' or rush-larsen' if hasattr(model_cls, 'rush_larsen') else ''}")
    if cfg.cell.kernel != kernel_variants.DEFAULT:
        try:
            kernel_variants.get(cfg.cell.kernel, cls.kernel_name)
        except ValueError as e:
            raise ConfigError(f"cell.kernel: {e}") from None
        if cfg.cell.integrator != "forward-euler":
            raise ConfigError(f"cell.kernel: the seed's variant '{cfg.cell.kernel}' is Forward Euler only; "
                              f"use 'fused' with cell.integrator = '{cfg.cell.integrator}'")
    if cfg.cell.regions:
        # the model checks the variants and the parameters' names; the messages name cell or the region
        c, tissue = cfg.cell, {"Cm": t.Cm, "chi": t.chi}
        try:
            cls(variant=c.variant or None, overrides=c.parameters, tissue=tissue)
        except cells.CellModelError as e:
            raise ConfigError(str(e)) from None
        for i, r in enumerate(c.regions):
            own = c.model_of(r) != c.model        # another model: the region's variant and parameters only
            try:
                region_cls = _region_model_class(cfg, i) if own else cls
                region_cls(variant=r.variant or (None if own else c.variant or None),
                           overrides=r.parameters if own else {**c.parameters, **r.parameters}, tissue=tissue)
            except cells.CellModelError as e:
                raise ConfigError(str(e).replace("cell.", f"cell.regions[{i}].", 1)) from None
    for k, f in cfg.cell.scale.items():
        if k not in cls.parameters:
            raise ConfigError(f"cell.scale.{k}: {cfg.cell.model} has no parameter '{k}'; allowed: "
                              f"{', '.join(sorted(cls.parameters))}")
        if not (math.isfinite(f) and f >= 0.0):
            raise ConfigError(f"cell.scale.{k}: a scale factor must be a finite number >= 0, got {f}")
    states = {st.name: st for st in cls.states}
    # intermediates (currents, fluxes) of CellML models may be recorded too (computed from the states)
    inter = cls.intermediates() if hasattr(cls, "intermediates") else {}
    if len(classes) > 1:
        _check_states_of_models(cfg, classes)
    for i, name in enumerate(cfg.output.states if len(classes) == 1 else ()):
        if (name not in states and name not in inter) or name == cls.states[0].name or name in cfg.output.states[:i]:
            why = ("is the membrane potential: it is the field Vm" if name == cls.states[0].name else
                   "is listed twice" if name in states or name in inter else
                   f"is neither a state nor an intermediate of {cfg.cell.model}" if inter else
                   f"is not a state of {cfg.cell.model}")
            raise ConfigError(f"output.states[{i}]: '{name}' {why}; states: "
                              f"{', '.join(st.name for st in cls.states[1:])}"
                              + (f"; intermediates: see cardiosim model info {cfg.cell.model}" if inter else
                                 " (intermediates can be recorded for CellML models)"))
    if cfg.cell.initial_state:
        from cardiosim.cells import paced_state
        files.check_input("cell.initial_state", cfg.cell.initial_state, "cell file",
                          hint=_relative_hint(cfg, "cell.initial_state"))
        try:
            paced = paced_state.read(cfg.cell.initial_state, cfg.cell.model, list(states))
        except cells.CellModelError as e:
            raise ConfigError(str(e)) from None
        for k, v in paced.items():
            if not states[k].lower <= v <= states[k].upper:
                raise ConfigError(f"cell.initial_state: {k} = {v:g} {states[k].unit} in {cfg.cell.initial_state} "
                                  f"is outside the state's range [{states[k].lower:g}, {states[k].upper:g}]")
    for k, v in cfg.cell.initial.items():
        if k not in states:
            raise ConfigError(f"cell.initial.{k}: {cfg.cell.model} has no state '{k}'; "
                              f"allowed: {', '.join(st.name for st in cls.states)}")
        # The run checks every state against this range after each step; a start outside it would be reported
        # as a blow-up of the first step (blaming the time step), not as what it is.
        st = states[k]
        if not st.lower <= v <= st.upper:
            raise ConfigError(f"cell.initial.{k}: {v:g} {st.unit} is outside the range of the state "
                              f"[{st.lower:g}, {st.upper:g}] {st.unit} that {cfg.cell.model} allows")
    return cfg


def _check_states_of_models(cfg, classes: dict) -> None:
    """output.states in a run of several cell models: each name a state or intermediate of at least one of them
    (recorded at that model's cells, NaN at the others), in one unit wherever it occurs, not Vm, not twice."""
    units = {}
    for model, c in classes.items():
        inter = c.intermediates() if hasattr(c, "intermediates") else {}
        for st in c.states[1:]:
            units.setdefault(st.name, {})[model] = st.unit
        for n, u in inter.items():
            units.setdefault(n, {}).setdefault(model, u)
    vm = {c.states[0].name for c in classes.values()}
    for i, name in enumerate(cfg.output.states):
        if name in vm or name in cfg.output.states[:i] or name not in units:
            why = ("is the membrane potential: it is the field Vm" if name in vm else
                   "is listed twice" if name in units else
                   f"is neither a state nor an intermediate of any of this run's models ({', '.join(classes)})")
            raise ConfigError(f"output.states[{i}]: '{name}' {why}; see cardiosim model info MODEL for each "
                              f"model's states and intermediates")
        if len(set(units[name].values())) > 1:
            raise ConfigError(f"output.states[{i}]: '{name}' has different units in this run's models ("
                              + ", ".join(f"{u} in {m}" for m, u in units[name].items())
                              + "); one field holds one unit: leave it out")


def _region_model_class(cfg, i: int):
    """The class of cell.regions[i].model; ConfigError naming the key where it is no model."""
    from cardiosim import cells
    name = cfg.cell.regions[i].model
    try:
        return cells.model_class(name)
    except cells.CellModelError as e:
        msg = str(e).replace("cell.model: ", "")
        raise ConfigError(f"cell.regions[{i}].model: {msg}"
                          + _relative_hint(cfg, f"cell.regions[{i}].model") * ("no such" in msg)) from None


def _relative_hint(cfg, key: str) -> str:
    return (" (a relative path in a config file is relative to the config file's folder)"
            if key in cfg.resolved else "")


# The dataset a key reads from an HDF5 file of cardiosim geometry (cardiosim.domain.grid reads them by the same names).
H5_DATASETS = {"fibre_file": "fibres", "conductivity_file": "conductivity", "label_file": "labels"}


def input_files(cfg) -> dict:
    """{how the user calls it: path} of every file a run of ``cfg`` reads; cardiosim.runtime.files refuses a run that would
    write one of them."""
    t = cfg.tissue
    reads = {"the config file of this run": cfg.source_path,
             **{f"tissue.{k}": getattr(t, k) for k in H5_DATASETS},
             "tissue.microscopic.layout_file": t.microscopic.layout_file,
             "cell.model": cfg.cell.model if cfg.cell.model.lower().endswith(".cellml") else ""}
    return {k: v for k, v in reads.items() if v}


# --------------------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------------------
def parse_override(text: str) -> tuple[list[str], object]:
    """``section.key=value`` -> (["section", "key"], value); the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text}: expected section.key=value")
    path, raw = text.split("=", 1)
    parts = path.strip().split(".")
    if not all(parts):
        raise ConfigError(f"--set {text}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return parts, value


def apply_overrides(data: dict, overrides: list[str]) -> None:
    """Apply ``--set`` overrides to the TOML data. An entry of a table array is named by its index from 0 or by its
    ``name`` key: ``stimulus.1.start=300``, ``stimulus.S2.start=300``, ``ecg.leads.II.plus='"LA"'``; the whole array
    is replaced by giving it as TOML (``--set 'probe=[{name = "p", position = [0.5]}]'``)."""
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for i, p in enumerate(parts[:-1]):
            node = _override_step(node, p, parts[:i], text)
            if not isinstance(node, (dict, list)):
                raise ConfigError(f"--set {text}: {'.'.join(parts[:i + 1])} is not a section")
        if isinstance(node, list):
            raise ConfigError(f"--set {text}: {'.'.join(parts[:-1])} is a table array; name one of its entries "
                              f"(by index or name), e.g. {'.'.join(parts[:-1])}.0.{parts[-1]}")
        node[parts[-1]] = value


def _override_step(node, part: str, before: list[str], text: str):
    """One step of an override's path: a key of a table, or an entry of a table array by index or by name."""
    if not isinstance(node, list):
        return node.setdefault(part, {})
    where = ".".join(before)
    names = [e.get("name") for e in node if isinstance(e, dict)]
    if part.isdigit():
        if int(part) >= len(node):
            raise ConfigError(f"--set {text}: {where} has {len(node)} entries (0 to {len(node) - 1}); got index "
                              f"{part}")
        return node[int(part)]
    found = [e for e in node if isinstance(e, dict) and e.get("name") == part]
    if len(found) != 1:
        have = ", ".join(str(n) for n in names if n) or "none has a name"
        raise ConfigError(f"--set {text}: {where} has {'no' if not found else 'more than one'} entry named "
                          f"'{part}'; names: {have} (or give the index, 0 to {len(node) - 1})")
    return found[0]


# Keys naming files. A relative path written in a config file is relative to that file's folder (the config and
# its fibre file travel together); one given with --set, like --output, to the working directory. cell.model too,
# where it names a CellML file.
PATH_KEYS = (("tissue", "fibre_file"), ("tissue", "conductivity_file"), ("tissue", "label_file"), ("output", "path"),
             ("checkpoint", "path"), ("tissue.microscopic", "layout_file"), ("cell", "initial_state"))


def loads(text: str, overrides: list[str] = (), name: str = "config", path: Path | None = None) -> Config:
    """``path``: the file ``text`` was read from; relative paths in it are taken relative to its folder."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{name}: not valid TOML: {e}") from None
    overridden = {tuple(parse_override(o)[0]) for o in overrides}
    apply_overrides(data, list(overrides))
    from cardiosim.config import tomlwrite
    effective = tomlwrite.dumps(data) if overrides else text
    for sec in ("simulation", "grid"):
        if sec not in data:
            raise ConfigError(f"{sec}: missing section [{sec}]")
    cfg = _build(Config, data, "")
    cfg.source_text, cfg.source_name = text, name
    cfg.overrides, cfg.effective_text = list(overrides), effective
    if path is not None:
        cfg.source_path = str(path)
        for sec, k in PATH_KEYS:
            section = cfg
            for part in sec.split("."):
                section = getattr(section, part)
            v = getattr(section, k)
            if v and (*sec.split("."), k) not in overridden and not Path(v).is_absolute():
                setattr(section, k, str(path.parent / v))
                cfg.resolved.append(f"{sec}.{k}")
        m = cfg.cell.model
        if m.lower().endswith(".cellml") and ("cell", "model") not in overridden and not Path(m).is_absolute():
            cfg.cell.model = str(path.parent / m)
            cfg.resolved.append("cell.model")
        for i, r in enumerate(cfg.cell.regions):      # a region's own model, as cell.model
            given = ("cell", "regions", str(i), "model") in overridden or ("cell", "regions") in overridden
            if r.model.lower().endswith(".cellml") and not given and not Path(r.model).is_absolute():
                r.model = str(path.parent / r.model)
                cfg.resolved.append(f"cell.regions[{i}].model")
    return validate(cfg)


def load(path: str | Path, overrides: list[str] = ()) -> Config:
    path = files.check_input(None, path, "config file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    return loads(text, overrides, name=path.stem, path=path)


def check_all(path: str | Path, overrides: list[str] = (), most: int = 50) -> list[str]:
    """Every mistake of a config file, one line each (``cardiosim config check``). Validation stops at the first
    mistake, so the key it names is taken out of the file (its default then applies, or the check that needs it
    says it is missing) and the file validated again, until it passes, a mistake repeats, or one names no key
    (a mistake that follows from an earlier one is not reported twice)."""
    path = files.check_input(None, path, "config file")
    try:
        text = path.read_text()
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        return [f"{path}: cannot read: {e}"]
    except tomllib.TOMLDecodeError as e:
        return [f"{path.stem}: not valid TOML: {e}"]
    from cardiosim.config import tomlwrite
    found: list[str] = []
    stand_ins: list[str] = []     # required keys given a stand-in value: what mentions them follows from their mistake
    for _ in range(most):
        try:
            loads(tomlwrite.dumps(data) if found else text, overrides, name=path.stem, path=path)
            return found
        except ConfigError as e:
            msg = str(e)
            where = msg.split(":", 1)[0].strip()
            missing = msg.startswith(f"{where}: missing")
            reported = {f.split(":", 1)[0].strip() for f in found}
            follows = where in stand_ins or any(re.search(rf"\b{re.escape(k)}\b", msg) for k in stand_ins)
            if (missing and where in reported) or follows:
                # a consequence of a mistake already reported: not said again
                if missing and _stand_in(data, where):
                    stand_ins.append(where)
                    continue
                if not missing and _drop_key(data, where):
                    continue
                return found
            if msg in found:
                return found
            found.append(msg)
            if msg.startswith("--set") or not _drop_key(data, where):
                return found
    return found


def _stand_in(data: dict, where: str) -> bool:
    """Put a value of the right type in place of a required key that was taken out (``check_all``)."""
    section, _, name = where.rpartition(".")
    cls, node = Config, data
    for p in section.split(".") if section else []:
        hints = typing.get_type_hints(cls)
        if p not in hints or not _is_section(hints[p]) or not isinstance(node.get(p), dict):
            return False
        cls, node = hints[p], node[p]
    tp = typing.get_type_hints(cls).get(name)
    value = {float: 1.0, int: 1, str: "x", bool: False}.get(tp, [1.0] if typing.get_origin(tp) is list else None)
    if value is None:
        return False
    node[name] = value
    return True


def _drop_key(data: dict, where: str) -> bool:
    """Take the key ``where`` (``section.key``, ``stimulus[0].start``, ``grid.spacing[1]``) out of TOML data;
    False where it names no key that is there."""
    parts = []
    for p in where.split("."):
        m = re.fullmatch(r"([A-Za-z_][\w-]*)((?:\[\d+\])*)", p)
        if not m:
            return False
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    while parts and isinstance(parts[-1], int):   # grid.spacing[1]: the list is the key
        parts.pop()
    node = data
    for p in parts[:-1]:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return False
    if not isinstance(node, dict) or not parts or parts[-1] not in node:
        return False
    del node[parts[-1]]
    return True


# --------------------------------------------------------------------------------------------------------------
# Reference documentation, generated from the declarations
# --------------------------------------------------------------------------------------------------------------
def reference_markdown() -> str:
    lines = ["# Config keys", "",
             "Generated from `cardiosim/config/` by `cardiosim config --doc`. Units: cm, ms, mV, mS/cm, "
             "µF/cm², µA/cm² (per membrane area), µA/cm³ (per volume).", ""]

    def section(cls, title):
        lines.extend([f"## `{title}`", "", "| key | type | default | unit | allowed | meaning |",
                      "|---|---|---|---|---|---|"])
        subs = []
        for f, tp in _keys(cls):
            m = f.metadata
            if _is_section(tp) or (typing.get_origin(tp) is list and _is_section(typing.get_args(tp)[0])):
                inner = tp if _is_section(tp) else typing.get_args(tp)[0]
                subs.append((inner, f"{title}.{f.name}" if title != "(top)" else f.name,
                             typing.get_origin(tp) is list))
                continue
            if f.default is not dataclasses.MISSING:
                default = "—" if f.default is None else f"`{_fmt(f.default)}`"
            elif f.default_factory is not dataclasses.MISSING:
                default = f"`{f.default_factory()}`"
            else:
                default = "required"
            allowed = []
            if m.get("choices"):
                allowed.append(" \\| ".join(m["choices"]))
            for op, sym in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
                if m.get(op) is not None:
                    allowed.append(f"{sym} {m[op]}")
            if m.get("length"):
                allowed.append(f"{m['length'][0]}–{m['length'][1]} entries")
            lines.append(f"| `{f.name}` | {_describe(tp)} | {default} | {m.get('unit', '')} | "
                         f"{', '.join(allowed)} | {m.get('doc', '')} |")
        lines.append("")
        for inner, name, is_list in subs:
            section(inner, f"[{name}]" if is_list else name)

    for f, tp in _keys(Config):
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is list else tp
        section(inner, f"[{f.name}]" if typing.get_origin(tp) is list else f.name)
    return "\n".join(lines) + "\n"
