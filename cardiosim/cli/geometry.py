"""``cardiosim geometry``: anatomy onto the grid once (cardiosim.domain.anatomy), and rule-based fibres for a
geometry file (``geometry fibres``, cardiosim.domain.fibres: PETSc on this one process, no mpirun)."""

from __future__ import annotations

from cardiosim.cli import common

START = common.LOCAL


def add_parser(sub) -> None:
    g = sub.add_parser("geometry", help="anatomy onto the grid once: labels and fibres (HDF5) for "
                                        "tissue.label_file and tissue.fibre_file",
                       usage="cardiosim geometry lv|biv|MESH --spacing CM --out GEO.h5 [--size human] [options]\n"
                             "       cardiosim geometry fibres GEO.h5 --out OUT.h5 [--helix-endo DEG ...]",
                       description="Writes GEO.h5 and prints the [grid] and [tissue] lines of a config that reads "
                                   "it (cardiosim/domain/anatomy.py); 'fibres' adds rule-based fibres and ventricular "
                                   "coordinates to a file with labelled surfaces (cardiosim/domain/fibres.py).")
    g.add_argument("source", help="'lv', 'biv': the built-in idealised left ventricle, both ventricles; or a "
                                  "tetrahedral mesh: .vtu, .vtk, .msh (meshio) or openCARP .elem (.pts and .lon "
                                  "beside it); or 'fibres' followed by a geometry file")
    g.add_argument("file", nargs="?", help="fibres: the geometry file (labels and surfaces) to make fibres for")
    g.add_argument("--spacing", type=float, help="grid spacing, cm (lv, biv, a mesh)")
    g.add_argument("--size", choices=("idealised", "human"), default=None,
                   help="lv, biv: the ventricles' dimensions: idealised (default; 2.5 cm from base to apex, walls "
                        "0.3 cm) or human (an adult's: 9 cm from base to apex, LV wall 1 cm, RV wall 0.4 cm; "
                        "cardiosim/domain/anatomy.py cites them)")
    for name, default, what in (("helix-endo", 60.0, "fibres' helix angle at the endocardium"),
                                ("helix-epi", -60.0, "fibres' helix angle at the epicardium"),
                                ("sheet-endo", 0.0, "sheets' angle at the endocardium"),
                                ("sheet-epi", 0.0, "sheets' angle at the epicardium")):
        g.add_argument(f"--{name}", type=float, default=None,
                       help=f"lv, biv, fibres: the {what}, degrees, linear in the wall's depth (default {default:g})")
    g.add_argument("--out", required=True, help="the HDF5 file to write")
    g.add_argument("--units", choices=("um", "mm", "cm"), default=None,
                   help="the mesh's coordinate units (default: um for openCARP, cm otherwise)")
    g.add_argument("--margin", type=int, default=1, help="empty grid nodes around the geometry (default 1)")
    g.add_argument("--overwrite", action="store_true", help="replace an existing --out file")


def main(args) -> int:
    from cardiosim.domain.anatomy import main as geometry_main   # lazy: NumPy (and PETSc for fibres), when it runs
    return geometry_main(args)
