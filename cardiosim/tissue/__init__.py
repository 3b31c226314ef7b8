"""The tissue equations: the discrete operators (stencils, assembled once), the monodomain and bidomain
systems and their solves, and the microscopic model."""

from cardiosim.tissue import microscopic
from cardiosim.tissue.equations import Bidomain, Monodomain


def make(grid, cfg, stencil):
    """The tissue model ``cfg`` asks for on ``grid``: the microscopic model's (cardiosim.tissue.microscopic), or
    bidomain or monodomain equations with ``stencil``."""
    if cfg.tissue.model == "microscopic":
        return microscopic.make(grid, cfg)
    cls = Bidomain if cfg.simulation.equations == "bidomain" else Monodomain
    return cls(grid, cfg, stencil)
