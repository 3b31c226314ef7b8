"""Cell models, by name. Each module defines one :class:`~cardiosim.cells.base.CellModel` subclass."""

from __future__ import annotations

import importlib

from .base import CellModel, CellModelError, Parameter, State

# name used in configs -> "module:Class"; imported lazily so that one broken model cannot stop the others.
_REGISTRY = {
    "pathmanathan-gray": "pathmanathan_gray:PathmanathanGray",
    "mitchell-schaeffer": "mitchell_schaeffer:MitchellSchaeffer",
    "bondarenko": "bondarenko:Bondarenko",
    "tt06": "tt06:TenTusscher2006Epi",
}


def available() -> list[str]:
    return sorted(_REGISTRY)


def model_class(name: str) -> type[CellModel]:
    """The class of a registered model, or of a CellML file (a name ending in .cellml: generated with Myokit,
    cardiosim.cells.cellml)."""
    if str(name).lower().endswith(".cellml"):
        from . import cellml
        return cellml.model_class(name)
    if name not in _REGISTRY:
        raise CellModelError(f"cell.model: unknown model '{name}'; allowed: {', '.join(available())}, "
                             f"or a CellML file (*.cellml)")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def make(name: str, variant: str | None = None, overrides=None, tissue=None) -> CellModel:
    return model_class(name)(variant=variant, overrides=overrides, tissue=tissue)


__all__ = ["CellModel", "CellModelError", "Parameter", "State", "available", "model_class", "make"]
