"""Cell models, by name. Each module defines one :class:`~cardiosim.cells.base.CellModel` subclass."""

from __future__ import annotations

import importlib

from cardiosim.cells.base import CellModel, CellModelError, Parameter, State
from cardiosim.cells import cellml

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
        return cellml.model_class(name)
    if name not in _REGISTRY:
        raise CellModelError(f"cell.model: unknown model '{name}'; allowed: {', '.join(available())}, "
                             f"or a CellML file (*.cellml)")
    module, cls = _REGISTRY[name].split(":")
    return getattr(importlib.import_module(f"{__name__}.{module}"), cls)


def make(name: str, variant: str | None = None, overrides=None, tissue=None) -> CellModel:
    return model_class(name)(variant=variant, overrides=overrides, tissue=tissue)


def describe(cls: type[CellModel]) -> str:
    """The text of ``cardiosim model info`` for a built-in model: states, parameters, variants, what it reads of
    the tissue (CellML models: cardiosim.cells.cellml.describe)."""
    lines = [f"{cls.name}: built-in cell model ({cls.__module__}.{cls.__name__})"
             + (f", C kernel kernels/{cls.kernel_name}.h" if cls.kernel_name else ", NumPy only"), "",
             f"states ({len(cls.states)}; name, initial value, unit, admissible range):"]
    for st in cls.states:
        rng = "" if st.lower == float("-inf") and st.upper == float("inf") else f"[{st.lower:g}, {st.upper:g}]"
        lines.append(f"    {st.name:<16} {st.initial:< 22.15g} {st.unit:<10} {rng}")
    lines += ["", f"parameters ({len(cls.parameters)}; override by name in cell.parameters or --param, scale with "
                  f"--scale):"]
    for name, p in cls.parameters.items():
        lines.append(f"    {name:<16} {p.value:< 22.15g} {p.unit:<12} {p.doc}".rstrip())
    if cls.variants:
        lines += ["", f"variants (cell.variant / --variant; default {cls.default_variant}):"]
        lines += [f"    {v}: " + ", ".join(f"{k} = {x:g}" for k, x in ps.items()) for v, ps in cls.variants.items()]
    if cls.needs_tissue:
        lines += ["", f"reads the tissue constants: {', '.join(cls.needs_tissue)}"]
    return "\n".join(lines) + "\n"


__all__ = ["CellModel", "CellModelError", "Parameter", "State", "available", "model_class", "make", "describe"]
