"""``cardiosim model info MODEL``: a cell model as cardiosim runs it (cardiosim.cells, cardiosim.cells.cellml)."""

from __future__ import annotations

from cardiosim.cli import common
from cardiosim.runtime.errors import UserError

START = common.LOCAL


def add_parser(sub) -> None:
    mo = sub.add_parser("model", help="a cell model: built in, or a CellML file as cardiosim generates it (Myokit)",
                        usage="cardiosim model info MODEL")
    mo.add_argument("action", choices=("info",), help="info: states (initial values, units), the gates Rush-Larsen "
                                                      "updates, parameters (defaults, units), guarded singularities")
    mo.add_argument("file", metavar="MODEL",
                    help="a built-in model (cardiosim cell --list) or a CellML file (*.cellml)")


def main(args) -> int:
    """``cardiosim model info MODEL``: a built-in model's states, parameters and variants, or what the generator
    makes of a CellML file (no MPI, no PETSc)."""
    from cardiosim import cells   # lazy: NumPy (and Myokit for CellML), when it runs
    from cardiosim.cells import CellModelError, cellml   # lazy: as cells
    try:
        cls = cells.model_class(args.file)
    except CellModelError as e:
        raise UserError(f"cardiosim model info: {e}") from None
    print(cellml.describe(cls) if cellml.is_cellml(args.file) else cells.describe(cls), end="")
    return 0
