"""A Purkinje network as a graph: node positions (cm), edges, the root (the His bundle's origin), the terminals
(the candidates for Purkinje–myocardial junctions, PMJs) and, optionally, a radius per edge (cm).

Files (so that a network can be drawn or inspected in ParaView, and made by other tools):

* ``.vtu`` and legacy ``.vtk`` unstructured grids with line cells, through meshio;
* ``.vtp`` (VTK XML PolyData, the form most Purkinje tools and ParaView write) with its ``Lines``: read here
  (ascii, inline binary and appended data, raw or base64, uncompressed or zlib/lzma compressed; meshio has no PolyData
  reader) and written as ascii;
* legacy ``.vtk`` POLYDATA with ``LINES`` in ASCII (meshio refuses POLYDATA).

A polyline of k points is k − 1 edges. Points closer than ``merge`` (cm) are one node, so that branches written as
separate polylines that repeat their parent's end point join up. Point data read: ``root`` (or ``his``: the root is
the first point where it is non-zero), ``pmj`` (or ``terminal``: which nodes are PMJ candidates; default every leaf
other than the root) and ``radius`` (per point, an edge taking the mean of its ends); cell data ``radius`` (per
line). Without ``root`` in the file, the root is the caller's (an index, or a position: the nearest node), else
point 0. Written: every edge as a two-point line, point data ``root``, ``pmj``, ``distance`` (path length from the
root, cm) and whatever the caller adds (e.g. ``activation_time``), cell data ``radius`` where the network has one.
"""

from __future__ import annotations

import base64
import lzma
import zlib
from pathlib import Path
from xml.etree import ElementTree

import numpy as np

from cardiosim.runtime.errors import SimulationError, UserError, io_reason

UNITS = {"um": 1e-4, "mm": 0.1, "cm": 1.0}
RESERVED = ("root", "his", "pmj", "terminal", "radius", "distance")   # point data with a meaning here
MERGE = 1e-7          # cm: points closer than this are one node (a repeated branch point)


class NetworkError(UserError):
    """A network that cannot be used: a file it cannot be read from, a graph that is not connected, ..."""


class Network:
    """``points`` (n, 3) cm; ``edges`` (m, 2) node indices; ``root`` a node index; ``radius`` (m,) cm or None;
    ``pmj`` (n,) bool, the PMJ candidates (default: every leaf but the root). ``origin`` (n,): for a refined network,
    the node of the network it was refined from that each node is (−1 for a node added on an edge); ``data``: more
    per-node arrays ({name: (n,)}: the grown networks' ``part``), written to files and read back. ``detached``:
    pieces the root does not reach are allowed (a blocked bundle branch's distal network, kept to be activated
    backwards through its PMJs from the myocardium); each is a tree of its own in the cable's solve."""

    def __init__(self, points, edges, root: int = 0, radius=None, pmj=None, name: str = "", origin=None,
                 data: dict | None = None, detached: bool = False):
        self.points = np.ascontiguousarray(np.asarray(points, dtype=np.float64).reshape(-1, 3))
        self.edges = np.ascontiguousarray(np.asarray(edges, dtype=np.int64).reshape(-1, 2))
        self.root = int(root)
        self.detached = bool(detached)
        self.radius = None if radius is None else np.ascontiguousarray(np.broadcast_to(
            np.asarray(radius, dtype=np.float64), (len(self.edges),)))
        self.name = name
        n = len(self.points)
        if self.edges.size and (self.edges.min() < 0 or self.edges.max() >= n):
            raise NetworkError(f"{name or 'network'}: an edge names a node outside 0..{n - 1}")
        if not 0 <= self.root < n:
            raise NetworkError(f"{name or 'network'}: root {root} is not a node (0..{n - 1})")
        if pmj is None:
            pmj = self.leaves_mask()
        self.pmj = np.asarray(pmj, dtype=bool).reshape(n).copy()
        self.origin = np.arange(n) if origin is None else np.asarray(origin, dtype=np.int64)
        self.data = {k: np.asarray(v).reshape(n) for k, v in (data or {}).items()}   # per node: "part", ...

    # -- the graph --------------------------------------------------------------------------------------------------
    @property
    def n_nodes(self) -> int:
        return len(self.points)

    @property
    def n_edges(self) -> int:
        return len(self.edges)

    @property
    def lengths(self) -> np.ndarray:
        """(m,) cm."""
        return np.linalg.norm(self.points[self.edges[:, 1]] - self.points[self.edges[:, 0]], axis=1)

    @property
    def degree(self) -> np.ndarray:
        return np.bincount(self.edges.reshape(-1), minlength=self.n_nodes)

    def leaves_mask(self) -> np.ndarray:
        leaf = self.degree == 1
        leaf[self.root] = False
        return leaf

    @property
    def terminals(self) -> np.ndarray:
        """The PMJ candidates' node indices."""
        return np.flatnonzero(self.pmj)

    def adjacency(self, weights=None):
        """The symmetric (n, n) scipy.sparse matrix with ``weights`` (default 1) at each edge."""
        from scipy import sparse
        w = np.ones(self.n_edges) if weights is None else np.asarray(weights, dtype=float)
        i, j = self.edges[:, 0], self.edges[:, 1]
        return sparse.coo_matrix((np.concatenate([w, w]), (np.concatenate([i, j]), np.concatenate([j, i]))),
                                 shape=(self.n_nodes, self.n_nodes)).tocsr()

    def components(self) -> int:
        from scipy.sparse import csgraph
        return int(csgraph.connected_components(self.adjacency(), directed=False)[0])

    def is_tree(self) -> bool:
        """Connected and without cycles (n − 1 edges, none repeated)."""
        return self.n_edges == self.n_nodes - 1 and self.components() == 1

    def is_forest(self) -> bool:
        """Each connected piece a tree (n − pieces edges)."""
        return self.n_edges == self.n_nodes - self.components()

    def distance(self) -> np.ndarray:
        """Path length from the root along the edges (cm), per node (inf where not connected)."""
        from scipy.sparse import csgraph
        return csgraph.dijkstra(self.adjacency(self.lengths), directed=False, indices=self.root)

    def check(self) -> "Network":
        """Refuse what a cable cannot run on: no edge, an edge from a node to itself or of zero length, a network
        in pieces. Returns self."""
        what = self.name or "network"
        if self.n_edges == 0:
            raise NetworkError(f"{what}: has no edges")
        if np.any(self.edges[:, 0] == self.edges[:, 1]):
            raise NetworkError(f"{what}: an edge joins a node to itself")
        short = self.lengths <= 0.0
        if short.any():
            raise NetworkError(f"{what}: {int(short.sum())} edge(s) of zero length")
        if self.radius is not None and not np.all(self.radius > 0):
            raise NetworkError(f"{what}: every edge's radius must be > 0 cm")
        pieces = self.components()
        if pieces > 1 and not self.detached:
            raise NetworkError(f"{what}: is in {pieces} pieces that are not connected; a network is one piece "
                               f"(its root reaches every node)")
        return self

    def refine(self, spacing: float) -> "Network":
        """Each edge cut into ceil(length / spacing) equal pieces (the cable's spacing, cm). The nodes of this
        network keep their indices and come first; ``origin`` says which they are."""
        if spacing <= 0:
            raise NetworkError(f"spacing {spacing} cm must be > 0")
        length = self.lengths
        pieces = np.maximum(1, np.ceil(length / spacing * (1 - 1e-12)).astype(np.int64))
        points, edges, radius, at = [self.points], [], [], []
        nxt = self.n_nodes
        for e, (a, b) in enumerate(self.edges):
            k = int(pieces[e])
            if k == 1:
                edges.append([[a, b]])
            else:
                s = np.arange(1, k)[:, None] / k
                points.append(self.points[a] + s * (self.points[b] - self.points[a]))
                at.append(np.full(k - 1, a))
                chain = np.concatenate([[a], nxt + np.arange(k - 1), [b]])
                edges.append(np.stack([chain[:-1], chain[1:]], axis=1))
                nxt += k - 1
            if self.radius is not None:
                radius.append(np.full(k, self.radius[e]))
        n_new = nxt - self.n_nodes
        pmj = np.concatenate([self.pmj, np.zeros(n_new, bool)])
        origin = np.concatenate([self.origin, -np.ones(n_new, np.int64)])
        at = np.concatenate(at) if at else np.zeros(0, np.int64)       # an added node takes its edge's start's data
        data = {k: np.concatenate([v, v[at]]) for k, v in self.data.items()}
        return Network(np.concatenate(points), np.concatenate([np.asarray(x).reshape(-1, 2) for x in edges]),
                       self.root, np.concatenate(radius) if radius else None, pmj, self.name, origin, data,
                       self.detached)

    def point_data(self) -> dict:
        return {"root": (np.arange(self.n_nodes) == self.root).astype(np.uint8), "pmj": self.pmj.astype(np.uint8),
                "distance": self.distance(), **self.data}


# -- reading -----------------------------------------------------------------------------------------------------------
def read(path, root=None, units: str = "cm", merge: float = MERGE) -> Network:
    """The network in a .vtp, .vtu or .vtk file (the module's docstring says what is read). ``root``: a node index or
    a position (cm, after ``units``) whose nearest node is the root, where the file marks none; ``units``: the file's
    length unit (um, mm, cm)."""
    path = Path(path)
    if units not in UNITS:
        raise NetworkError(f"{path}: units '{units}' unknown; allowed: {', '.join(UNITS)}")
    if not path.is_file():
        raise NetworkError(f"{path}: no such file")
    suffix = path.suffix.lower()
    try:
        if suffix == ".vtp":
            points, lines, pdata, cdata = _read_vtp(path)
        elif suffix == ".vtk" and _legacy_polydata(path):
            points, lines, pdata, cdata = _read_legacy_polydata(path)
        elif suffix in (".vtu", ".vtk"):
            points, lines, pdata, cdata = _read_meshio(path)
        else:
            raise NetworkError(f"{path}: a network is read from .vtp, .vtu or .vtk (polylines or line cells)")
    except (UserError, SimulationError):
        raise
    except Exception as e:                   # XML, base64, zlib and meshio raise many kinds
        raise NetworkError(f"{path}: cannot read a network from it ({type(e).__name__}: "
                           f"{str(e).splitlines()[0] if str(e) else ''})") from None
    return _assemble(path, points * UNITS[units], lines, pdata, cdata, root, units, merge)


def _assemble(path, points, lines, pdata, cdata, root, units, merge) -> Network:
    from scipy.spatial import cKDTree
    if len(points) == 0 or not lines:
        raise NetworkError(f"{path}: holds no lines (a network is polylines or line cells)")
    # one node per distinct position: branches drawn as separate polylines share their branch points
    if merge > 0:
        pairs = cKDTree(points).query_pairs(merge, output_type="ndarray")
        from scipy.sparse import coo_matrix, csgraph
        n = len(points)
        g = coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])) if len(pairs) else ([], ([], [])),
                       shape=(n, n))
        _, label = csgraph.connected_components(g, directed=False)
    else:
        label = np.arange(len(points))
    # the lowest point index of each merged group names the node; nodes keep the file's order
    first = np.full(label.max() + 1, len(points))
    np.minimum.at(first, label, np.arange(len(points)))
    keep = np.sort(first)
    node_of_label = np.empty_like(first)
    node_of_label[np.argsort(first)] = np.arange(len(first))
    node = node_of_label[label]
    edges, line_of_edge = [], []
    for li, line in enumerate(lines):
        ids = node[np.asarray(line, dtype=np.int64)]
        e = np.stack([ids[:-1], ids[1:]], axis=1)
        e = e[e[:, 0] != e[:, 1]]
        edges.append(e)
        line_of_edge.append(np.full(len(e), li))
    edges = np.concatenate(edges) if edges else np.zeros((0, 2), np.int64)
    line_of_edge = np.concatenate(line_of_edge)
    # one edge per pair of nodes
    _, uniq = np.unique(np.sort(edges, axis=1), axis=0, return_index=True)
    uniq = np.sort(uniq)
    edges, line_of_edge = edges[uniq], line_of_edge[uniq]
    pts = points[keep]
    scale = UNITS[units]
    radius = None
    if "radius" in cdata:
        radius = np.asarray(cdata["radius"], dtype=float).reshape(-1)[line_of_edge] * scale
    elif "radius" in pdata:
        r = np.asarray(pdata["radius"], dtype=float).reshape(-1)[keep] * scale
        radius = 0.5 * (r[edges[:, 0]] + r[edges[:, 1]])

    def flag(*names):
        for nm in names:
            if nm in pdata:
                return np.asarray(pdata[nm]).reshape(len(points), -1)[:, 0][keep] != 0
        return None

    marked = flag("root", "his")
    if marked is not None and marked.any():
        r = int(np.argmax(marked))
    elif root is None:
        r = 0
    elif np.ndim(root) == 0:
        r = int(root)
        if not 0 <= r < len(pts):
            raise NetworkError(f"{path}: root {r} is not a node (0..{len(pts) - 1})")
    else:
        r = int(cKDTree(pts).query(np.asarray(root, dtype=float).reshape(3))[1])
    extra = {k: np.asarray(v).reshape(-1)[keep] for k, v in pdata.items()
             if k not in RESERVED and np.size(v) == len(points)}
    net = Network(pts, edges, r, radius, None, name=str(path), data=extra)
    pmj = flag("pmj", "terminal")
    if pmj is not None:
        net.pmj = pmj & (np.arange(net.n_nodes) != r)
    return net


def _read_meshio(path: Path):
    import meshio
    m = meshio.read(path)
    lines, cdata = [], {}
    radius = []
    for b, block in enumerate(m.cells):
        if block.type != "line":
            continue
        lines.extend(block.data)
        r = m.cell_data.get("radius")
        if r is not None:
            radius.append(np.asarray(r[b]).reshape(-1))
    if radius:
        cdata["radius"] = np.concatenate(radius)
    pdata = {k: np.asarray(v) for k, v in m.point_data.items()}
    return np.asarray(m.points, dtype=float)[:, :3] if m.points.shape[1] >= 3 else np.pad(
        np.asarray(m.points, float), ((0, 0), (0, 3 - m.points.shape[1]))), lines, pdata, cdata


# VTK XML types -> NumPy
_TYPES = {"Int8": "i1", "UInt8": "u1", "Int16": "i2", "UInt16": "u2", "Int32": "i4", "UInt32": "u4", "Int64": "i8",
          "UInt64": "u8", "Float32": "f4", "Float64": "f8"}


def _read_vtp(path: Path):
    raw = path.read_bytes()
    appended, head = None, raw
    at = raw.find(b"<AppendedData")
    if at >= 0:
        head = raw[:at] + b"</VTKFile>"
        start = raw.index(b"_", raw.index(b">", at)) + 1
        end = raw.rfind(b"</AppendedData>")
        appended = (raw[at:raw.index(b">", at) + 1], raw[start:end])
    root = ElementTree.fromstring(head)
    if root.get("type") != "PolyData":
        raise NetworkError(f"{path}: a VTK XML file of type {root.get('type')}, not PolyData")
    order = "<" if root.get("byte_order", "LittleEndian") == "LittleEndian" else ">"
    header = _TYPES[root.get("header_type", "UInt32")]
    compressor = root.get("compressor")
    encoding = None
    if appended is not None:
        encoding = ElementTree.fromstring(appended[0].decode() + "</AppendedData>").get("encoding", "raw")
    ctx = dict(order=order, header=header, compressor=compressor, appended=appended, encoding=encoding, path=path)
    pieces = root.findall("./PolyData/Piece")
    if not pieces:
        raise NetworkError(f"{path}: no PolyData Piece")
    points, lines, pdata, cdata, base = [], [], {}, {}, 0
    for piece in pieces:
        n = int(piece.get("NumberOfPoints", 0))
        p = _array(piece.find("./Points/DataArray"), ctx).reshape(n, -1).astype(float)
        points.append(np.pad(p, ((0, 0), (0, 3 - p.shape[1]))) if p.shape[1] < 3 else p[:, :3])
        ln = piece.find("./Lines")
        if ln is not None:
            arrs = {a.get("Name"): a for a in ln.findall("./DataArray")}
            conn = _array(arrs["connectivity"], ctx).astype(np.int64)
            offs = _array(arrs["offsets"], ctx).astype(np.int64)
            starts = np.concatenate([[0], offs[:-1]])
            lines.extend(conn[s:e] + base for s, e in zip(starts, offs))
        for where, out in (("PointData", pdata), ("CellData", cdata)):
            for a in piece.findall(f"./{where}/DataArray"):
                name = a.get("Name")
                if where == "PointData" and int(a.get("NumberOfComponents", 1)) == 1 or name == "radius":
                    v = _array(a, ctx)
                    if where == "CellData":     # cells are verts, then lines, then strips and polys
                        nv = int(piece.get("NumberOfVerts", 0))
                        v = v[nv:nv + int(piece.get("NumberOfLines", 0))]
                    out.setdefault(name, []).append(v)
        base += n
    pdata = {k: np.concatenate(v) for k, v in pdata.items()}
    cdata = {k: np.concatenate(v) for k, v in cdata.items()} if len(pieces) == 1 or all(
        len(v) == len(pieces) for v in cdata.values()) else {}
    return np.concatenate(points), lines, pdata, cdata


def _array(el, ctx) -> np.ndarray:
    if el is None:
        raise NetworkError(f"{ctx['path']}: a DataArray is missing")
    dtype = np.dtype(ctx["order"] + _TYPES[el.get("type")]) if el.get("type") in _TYPES else None
    if dtype is None:
        raise NetworkError(f"{ctx['path']}: DataArray type {el.get('type')} is not read")
    fmt = el.get("format", "ascii")
    if fmt == "ascii":
        return np.array((el.text or "").split(), dtype=dtype.newbyteorder("="))
    if fmt == "binary":
        return _decode(ctx, (el.text or "").strip().encode(), True, dtype)
    if fmt == "appended":
        off = int(el.get("offset", 0))
        data = ctx["appended"][1]
        return _decode(ctx, data[off:], ctx["encoding"] == "base64", dtype)
    raise NetworkError(f"{ctx['path']}: DataArray format {fmt} is not read")


def _decode(ctx, data: bytes, b64: bool, dtype) -> np.ndarray:
    """One array of a VTK XML file's binary data: a header (the byte count, or the compressed blocks' sizes), then
    the bytes. Base64 text encodes the header and the data either apart or together; both are read."""
    h = np.dtype(ctx["order"] + ctx["header"])
    hb = h.itemsize
    comp = ctx["compressor"]
    if b64:
        data = b"".join(data.split())

        def chars(nbytes):
            return 4 * -(-nbytes // 3)
    if comp is None:
        if b64:
            n = int(np.frombuffer(base64.b64decode(data[:chars(hb)])[:hb], h)[0])
            body = base64.b64decode(data[chars(hb):chars(hb) + chars(n)] + b"===")[:n] if len(
                data) >= chars(hb) + chars(n) else b""
            if len(body) < n:                                    # encoded together
                whole = base64.b64decode(data[:chars(hb + n)])
                body = whole[hb:hb + n]
        else:
            n = int(np.frombuffer(data[:hb], h)[0])
            body = data[hb:hb + n]
        return np.frombuffer(body, dtype).astype(dtype.newbyteorder("="))
    unpack = {"vtkZLibDataCompressor": zlib.decompress, "vtkLZMADataCompressor": lzma.decompress}.get(comp)
    if unpack is None:
        raise NetworkError(f"{ctx['path']}: compressor {comp} is not read (zlib or lzma are; or write it "
                           f"uncompressed)")
    if b64:
        nb = int(np.frombuffer(base64.b64decode(data[:chars(3 * hb)])[:hb], h)[0])
        hlen = (3 + nb) * hb
        hdr = np.frombuffer(base64.b64decode(data[:chars(hlen)])[:hlen], h).astype(np.int64)
        csum = int(hdr[3:].sum())
        rest = base64.b64decode(data[chars(hlen):chars(hlen) + chars(csum)])
        if len(rest) < csum:                                     # encoded together
            whole = base64.b64decode(data[:chars(hlen + csum)])
            rest = whole[hlen:]
    else:
        nb = int(np.frombuffer(data[:hb], h)[0])
        hlen = (3 + nb) * hb
        hdr = np.frombuffer(data[:hlen], h).astype(np.int64)
        rest = data[hlen:]
    out, at = [], 0
    for size in hdr[3:]:
        out.append(unpack(rest[at:at + int(size)]))
        at += int(size)
    return np.frombuffer(b"".join(out), dtype).astype(dtype.newbyteorder("="))


def _legacy_polydata(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(1024).upper()
    return b"DATASET POLYDATA" in head


def _read_legacy_polydata(path: Path):
    lines_of_text = path.read_bytes().split(b"\n")
    if len(lines_of_text) < 4 or lines_of_text[2].strip().upper() != b"ASCII":
        raise NetworkError(f"{path}: a legacy VTK POLYDATA file is read in ASCII only (or write it as .vtp)")
    tokens = b" ".join(lines_of_text[3:]).split()
    i, points, lines, pdata, cdata, section = 0, None, [], {}, {}, None

    def take(n, dtype):
        nonlocal i
        out = np.array(tokens[i:i + n], dtype=dtype)
        i += n
        return out

    while i < len(tokens):
        key = tokens[i].upper()
        if key == b"POINTS":
            n_points = int(tokens[i + 1])
            i += 3
            points = take(3 * n_points, float).reshape(n_points, 3)
        elif key == b"LINES":
            a, b = int(tokens[i + 1]), int(tokens[i + 2])
            i += 3
            if i < len(tokens) and tokens[i].upper() == b"OFFSETS":           # the 5.1 layout
                i += 2                                                       # OFFSETS vtktypeint64
                offs = take(a, np.int64)
                if i >= len(tokens) or tokens[i].upper() != b"CONNECTIVITY":
                    raise NetworkError(f"{path}: LINES: OFFSETS without CONNECTIVITY")
                i += 2
                conn = take(b, np.int64)
                lines.extend(conn[s:e] for s, e in zip(offs[:-1], offs[1:]))
            else:
                flat = take(b, np.int64)
                at = 0
                for _ in range(a):
                    k = int(flat[at])
                    lines.append(flat[at + 1:at + 1 + k])
                    at += k + 1
        elif key in (b"VERTICES", b"POLYGONS", b"TRIANGLE_STRIPS"):
            a, b = int(tokens[i + 1]), int(tokens[i + 2])
            i += 3
            if i < len(tokens) and tokens[i].upper() == b"OFFSETS":
                i += 2 + a
                i += 2 + b
            else:
                i += b
        elif key == b"POINT_DATA":
            section = (pdata, int(tokens[i + 1]))
            i += 2
        elif key == b"CELL_DATA":
            section = (cdata, int(tokens[i + 1]))
            i += 2
        elif key == b"SCALARS" and section is not None:         # SCALARS name type [components]
            name = tokens[i + 1].decode()
            i += 3
            ncomp = 1
            if i < len(tokens) and tokens[i].isdigit():
                ncomp = int(tokens[i])
                i += 1
            if i < len(tokens) and tokens[i].upper() == b"LOOKUP_TABLE":
                i += 2
            section[0][name] = take(section[1] * ncomp, float)
        else:
            i += 1
    if points is None:
        raise NetworkError(f"{path}: no POINTS")
    return points, lines, pdata, cdata


# -- writing -----------------------------------------------------------------------------------------------------------
def write(net: Network, path, point_data: dict | None = None) -> Path:
    """The network as ``.vtp`` (ascii VTK XML PolyData, written here) or ``.vtu``/``.vtk`` (meshio), with point data
    root, pmj, distance and ``point_data`` ({name: (n,) array}); written under a temporary name and renamed into
    place."""
    path = Path(path)
    data = {**net.point_data(), **{k: np.asarray(v) for k, v in (point_data or {}).items()}}
    for k, v in data.items():
        if len(v) != net.n_nodes:
            raise NetworkError(f"point data {k}: {len(v)} values for {net.n_nodes} nodes")
    suffix = path.suffix.lower()
    if suffix not in (".vtp", ".vtu", ".vtk"):
        raise NetworkError(f"{path}: a network is written as .vtp, .vtu or .vtk")
    tmp = path.with_name(f".{path.name}.part{path.suffix}")
    try:
        if suffix == ".vtp":
            tmp.write_text(_vtp_text(net, data))
        else:
            import meshio
            cell_data = {"radius": [net.radius]} if net.radius is not None else {}
            meshio.write(tmp, meshio.Mesh(net.points, [("line", net.edges)], point_data=data, cell_data=cell_data),
                         file_format="vtu" if suffix == ".vtu" else "vtk", **({"binary": False}
                                                                              if suffix == ".vtk" else {}))
        tmp.replace(path)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise SimulationError(f"{path}: cannot write ({io_reason(e)}); nothing written") from None
    return path


def _ascii(a: np.ndarray) -> str:
    if a.dtype.kind == "f":
        return " ".join(repr(float(x)) if np.isfinite(x) else ("nan" if np.isnan(x) else
                                                               ("inf" if x > 0 else "-inf")) for x in a.ravel())
    return " ".join(str(int(x)) for x in a.ravel())


def _vtk_type(a: np.ndarray) -> str:
    return {"f": "Float64", "u": "UInt8" if a.dtype.itemsize == 1 else "UInt64"}.get(a.dtype.kind, "Int64")


def _vtp_text(net: Network, data: dict) -> str:
    m = net.n_edges
    out = ['<?xml version="1.0"?>',
           '<VTKFile type="PolyData" version="1.0" byte_order="LittleEndian" header_type="UInt64">',
           '<PolyData>',
           f'<Piece NumberOfPoints="{net.n_nodes}" NumberOfVerts="0" NumberOfLines="{m}" NumberOfStrips="0" '
           f'NumberOfPolys="0">',
           '<PointData>']
    for k, v in data.items():
        v = np.asarray(v)
        if v.dtype.kind == "b":
            v = v.astype(np.uint8)
        out.append(f'<DataArray type="{_vtk_type(v)}" Name="{k}" format="ascii">{_ascii(v)}</DataArray>')
    out.append('</PointData>')
    out.append('<CellData>')
    if net.radius is not None:
        out.append(f'<DataArray type="Float64" Name="radius" format="ascii">{_ascii(net.radius)}</DataArray>')
    out.append('</CellData>')
    out.append('<Points><DataArray type="Float64" NumberOfComponents="3" format="ascii">'
               f'{_ascii(net.points)}</DataArray></Points>')
    out.append('<Lines>'
               f'<DataArray type="Int64" Name="connectivity" format="ascii">{_ascii(net.edges)}</DataArray>'
               f'<DataArray type="Int64" Name="offsets" format="ascii">{_ascii(2 * np.arange(1, m + 1))}'
               '</DataArray></Lines>')
    out += ['</Piece>', '</PolyData>', '</VTKFile>', '']
    return "\n".join(out)


__all__ = ["Network", "NetworkError", "read", "write", "UNITS"]
