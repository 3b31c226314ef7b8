"""Run configuration: a TOML file validated into typed, unit-annotated sections.

Every key is declared once (cardiosim.config.schema) with its type, default, unit, allowed values and a line of
documentation; validation (cardiosim.config.validate), ``--set`` overrides and loading (cardiosim.config.load)
and the key reference (cardiosim.config.reference: ``cardiosim config --doc``, docs/user/config.md) all read the
same declarations. Errors name the key by its dotted path and say what is allowed::

    config error: grid.spacing: must be > 0 (cm); got -0.01

Units are part of the key's declaration and appear in the reference: lengths in cm, times in ms, potentials in
mV, conductivities in mS/cm, capacitance in µF/cm², surface-to-volume ratio in cm⁻¹, currents in µA/cm² (per
membrane area) or µA/cm³ (per tissue volume).

The names below are the package's interface: ``from cardiosim import config; config.load(path)``.
"""

from cardiosim.cells.stimulus import ode_step
from cardiosim.config import tomlwrite
from cardiosim.config.load import (PATH_KEYS, apply_overrides, check_all, input_files, load, loads,
                                   parse_override, tomllib)
from cardiosim.config.reference import reference_markdown
from cardiosim.config.schema import (COORDINATES, H5_DATASETS, JUNCTION_TYPES, Cell, CellRegion, Checkpoint,
                                     Checks, Config, ConfigError, ConductivityRegion, Ecg, Electrode, Fibrosis,
                                     Grid, JunctionRegion, Junctions, Lead, Microscopic, Output, Probe, Region,
                                     Simulation, Stimulus, Tissue, key)
from cardiosim.config.validate import PROBE_NAME, RESERVED_PROBE_NAMES, validate

__all__ = [
    "COORDINATES", "H5_DATASETS", "JUNCTION_TYPES", "PATH_KEYS", "PROBE_NAME", "RESERVED_PROBE_NAMES",
    "Cell", "CellRegion", "Checkpoint", "Checks", "Config", "ConfigError", "ConductivityRegion", "Ecg", "Electrode",
    "Fibrosis", "Grid", "JunctionRegion", "Junctions", "Lead", "Microscopic", "Output", "Probe", "Region",
    "Simulation", "Stimulus", "Tissue",
    "apply_overrides", "check_all", "input_files", "key", "load", "loads", "ode_step", "parse_override",
    "reference_markdown", "tomllib", "tomlwrite", "validate",
]
