"""The XDMF sidecar of a result file: what ParaView (and VisIt) need to open the HDF5 output directly.

One ``.xdmf`` beside the ``.h5`` (same stem), XDMF 2: a temporal collection with one uniform grid per complete
snapshot. The grid is a 3DCoRectMesh (origin at the first node: grid.origin, plus h/2 on the cell-centred grid; node spacing
h; XDMF lists dimensions, origin and spacing slowest axis first: z, y, x); a 2D grid is one node thick in z, a 1D grid one node in y and z, so that x stays x in
ParaView (XDMF's 2DCoRectMesh would put a 2D grid in ParaView's y-z plane). Each snapshot's Vm and φe are HyperSlab DataItems selecting one time slice of the
time-stacked datasets; the maps (activation time, APD) are attached to every snapshot as static attributes once
they exist. A 1D grid is written as a 2D mesh one node high (ParaView shows it as a line of points).

The writer (:class:`Sidecar`) rewrites the whole file after every snapshot, atomically (temporary file, then
rename), so that the sidecar of a run that was cut short lists only snapshots that were complete.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from xml.sax.saxutils import quoteattr


def _dims(shape) -> str:
    return " ".join(str(int(n)) for n in shape)


def _numbers(values) -> str:
    return " ".join(repr(float(v)) for v in values)


def mesh_shape(grid_shape_zyx) -> tuple[int, ...]:
    """The (nz, ny, nx) of the XDMF mesh for a grid of natural shape ([nz,] [ny,] nx): missing axes have 1 node."""
    shape = tuple(int(n) for n in grid_shape_zyx)
    return (1,) * (3 - len(shape)) + shape


def grid(h5_name: str, grid_shape, spacing_xyz, datasets: dict, name: str, t: float, index: int, fields,
         maps=(), origin_xyz=None) -> str:
    """One snapshot: a uniform grid at time t whose node data are slice ``index`` of the time-stacked
    ``/fields/<name>`` and the whole ``/maps/<name>``.

    h5_name: the HDF5 file name as the sidecar refers to it (relative: same directory). grid_shape: the nodes in
    natural order ([nz,] [ny,] nx); spacing_xyz: node spacing (cm), x first. datasets: HDF5 path -> shape of
    every dataset referred to. origin_xyz: the first node (cm), x first; 0 (the microscopic model's cell-centred
    grid: h/2).
    """
    grid_shape = tuple(int(n) for n in grid_shape)
    mesh = mesh_shape(grid_shape)
    h = [float(v) for v in reversed(list(spacing_xyz))]          # slowest first, like the dimensions
    h = [h[-1]] * (3 - len(h)) + h                                # missing axes: any positive spacing
    o = [float(v) for v in reversed(list(origin_xyz if origin_xyz is not None else [0.0] * len(spacing_xyz)))]
    o = [0.0] * (3 - len(o)) + o
    topo = f'<Topology TopologyType="3DCoRectMesh" Dimensions="{_dims(mesh)}"/>'
    geom = ('<Geometry GeometryType="ORIGIN_DXDYDZ">'
            f'<DataItem Format="XML" NumberType="Float" Precision="8" Dimensions="3">{_numbers(o)}'
            '</DataItem><DataItem Format="XML" NumberType="Float" Precision="8" Dimensions="3">'
            f'{_numbers(h)}</DataItem></Geometry>')

    def attribute(label, path, lead):
        """Node data from ``path``: slice ``lead`` of a time-stacked dataset, or all of a map (lead = [])."""
        full = datasets[path]
        sel = [lead + [0] * len(grid_shape), [1] * len(full), [1] * len(lead) + list(grid_shape)]
        # Always a hyperslab whose result has the mesh's rank: VTK's XDMF reader misreads node data whose
        # declared rank differs from the mesh's.
        return (f'<Attribute Name={quoteattr(label)} AttributeType="Scalar" Center="Node">'
                f'<DataItem ItemType="HyperSlab" Type="HyperSlab" Dimensions="{_dims(mesh)}">'
                f'<DataItem Format="XML" NumberType="Int" Dimensions="3 {len(full)}">'
                f'{" ".join(_dims(s) for s in sel)}</DataItem>'
                f'<DataItem Format="HDF" NumberType="Float" Precision="8" Dimensions="{_dims(full)}">'
                f'{h5_name}:{path}</DataItem></DataItem></Attribute>')

    return (f'<Grid Name={quoteattr(name)} GridType="Uniform"><Time Value="{float(t)!r}"/>{topo}{geom}'
            + "".join(attribute(f, f"/fields/{f}", [index]) for f in fields)
            + "".join(attribute(m, f"/maps/{m}", []) for m in maps) + "</Grid>")


def document(grids) -> str:
    """The XDMF text: a temporal collection of the snapshot grids (see :func:`grid`)."""
    return "\n".join(['<?xml version="1.0" ?>', '<Xdmf Version="2.0">', '<Domain>',
                      '<Grid Name="cardiosim" GridType="Collection" CollectionType="Temporal">',
                      *grids, "</Grid>", "</Domain>", "</Xdmf>", ""])


def write(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically (a reader sees the old file or the new one, never half of one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def sidecar(h5_path: Path) -> Path:
    return Path(h5_path).with_suffix(".xdmf")


class Sidecar:
    """The XDMF file of a run being written (rank 0).

    :meth:`add` records a complete snapshot and rewrites the file, unless rewriting it every time would take more
    than about 5 % of the run's wall time (thousands of snapshots of a small grid): then it waits until 20 times
    the last rewrite's duration has passed, so the sidecar lags the HDF5 file by at most that. :meth:`finish`
    writes the final version, with the maps.
    """

    def __init__(self, h5_path: Path, grid_shape, spacing_xyz, fields, origin_xyz=None):
        self.path = sidecar(h5_path)
        self.origin = origin_xyz
        self.h5_name = Path(h5_path).name
        self.grid_shape, self.spacing, self.fields = grid_shape, spacing_xyz, list(fields)
        self.times: list[float] = []
        self.grids: list[str] = []          # one fragment per snapshot, kept (the shapes do not change)
        self.written_at = self.cost = 0.0

    def _grid(self, i, datasets, maps=()) -> str:
        return grid(self.h5_name, self.grid_shape, self.spacing, datasets, f"snapshot {i}", self.times[i], i,
                    self.fields, maps, self.origin)

    def add(self, t: float, datasets: dict) -> None:
        self.times.append(t)
        self.grids.append(self._grid(len(self.times) - 1, datasets))
        if time.perf_counter() - self.written_at >= 20 * self.cost:
            self._write()

    def finish(self, datasets: dict, maps) -> None:
        self.grids = [self._grid(i, datasets, maps) for i in range(len(self.times))]
        self._write()

    def _write(self) -> None:
        start = time.perf_counter()
        write(self.path, document(self.grids))
        self.written_at = time.perf_counter()
        self.cost = self.written_at - start
