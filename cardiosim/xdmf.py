"""The XDMF sidecar of a result file: what ParaView (and VisIt) need to open the HDF5 output directly.

One ``.xdmf`` beside the ``.h5`` (same stem), XDMF 2: a temporal collection with one uniform grid per complete
snapshot. The grid is a 3DCoRectMesh (origin 0, node spacing h; XDMF lists dimensions, origin and spacing slowest
axis first: z, y, x); a 2D grid is one node thick in z, a 1D grid one node in y and z, so that x stays x in
ParaView (XDMF's 2DCoRectMesh would put a 2D grid in ParaView's y-z plane). Each snapshot's Vm and φe are HyperSlab DataItems selecting one time slice of the
time-stacked datasets; the maps (activation time, APD) are attached to every snapshot as static attributes once
they exist. A 1D grid is written as a 2D mesh one node high (ParaView shows it as a line of points).

The writer rewrites the whole file after every snapshot, atomically (temporary file, then rename), so that the
sidecar of a run that was cut short lists exactly the snapshots that were complete.
"""

from __future__ import annotations

import os
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


def document(h5_name: str, grid_shape, spacing_xyz, datasets: dict, times, fields, maps=()) -> str:
    """The XDMF text.

    h5_name: the HDF5 file name as the sidecar refers to it (relative: same directory). grid_shape: the nodes
    in natural order ([nz,] [ny,] nx); spacing_xyz: node spacing (cm), x first. datasets: HDF5 path -> shape of every dataset referred to. times: the complete snapshots' times
    (ms), snapshot i being slice i of the time-stacked ``/fields/<name>``. fields: the time-stacked field names;
    maps: the ``/maps/<name>`` datasets to attach to every snapshot.
    """
    grid_shape = tuple(int(n) for n in grid_shape)
    mesh = mesh_shape(grid_shape)
    h = [float(v) for v in reversed(list(spacing_xyz))]          # slowest first, like the dimensions
    h = [h[-1]] * (3 - len(h)) + h                                # missing axes: any positive spacing
    topo = f'<Topology TopologyType="3DCoRectMesh" Dimensions="{_dims(mesh)}"/>'
    geom = ('<Geometry GeometryType="ORIGIN_DXDYDZ">'
            f'<DataItem Format="XML" NumberType="Float" Precision="8" Dimensions="3">{_numbers([0.0] * 3)}'
            '</DataItem><DataItem Format="XML" NumberType="Float" Precision="8" Dimensions="3">'
            f'{_numbers(h)}</DataItem></Geometry>')

    def heavy(path):
        return (f'<DataItem Format="HDF" NumberType="Float" Precision="8" Dimensions="{_dims(datasets[path])}">'
                f'{h5_name}:{path}</DataItem>')

    def attribute(name, path, index=None):
        """Node data from ``path``: slice ``index`` of a time-stacked dataset, or all of a map."""
        full = datasets[path]
        lead = [] if index is None else [index]
        sel = [lead + [0] * len(grid_shape), [1] * len(full), [1] * len(lead) + list(grid_shape)]
        # Always a hyperslab whose result has the mesh's rank: VTK's XDMF reader misreads node data whose
        # declared rank differs from the mesh's.
        return (f'<Attribute Name={quoteattr(name)} AttributeType="Scalar" Center="Node">'
                f'<DataItem ItemType="HyperSlab" Type="HyperSlab" Dimensions="{_dims(mesh)}">'
                f'<DataItem Format="XML" NumberType="Int" Dimensions="3 {len(full)}">'
                f'{" ".join(_dims(s) for s in sel)}</DataItem>{heavy(path)}</DataItem></Attribute>')

    lines = ['<?xml version="1.0" ?>', '<Xdmf Version="2.0">', '<Domain>',
             '<Grid Name="cardiosim" GridType="Collection" CollectionType="Temporal">']
    for i, t in enumerate(times):
        lines.append(f'<Grid Name="snapshot {i}" GridType="Uniform"><Time Value="{float(t)!r}"/>{topo}{geom}'
                     + "".join(attribute(name, f"/fields/{name}", i) for name in fields)
                     + "".join(attribute(name, f"/maps/{name}") for name in maps) + "</Grid>")
    lines += ["</Grid>", "</Domain>", "</Xdmf>", ""]
    return "\n".join(lines)


def write(path: Path, text: str) -> None:
    """Replace ``path`` by ``text`` atomically (a reader sees the old file or the new one, never half of one)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def sidecar(h5_path: Path) -> Path:
    return Path(h5_path).with_suffix(".xdmf")
