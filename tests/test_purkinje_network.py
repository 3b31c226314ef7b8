"""Purkinje networks (cardiosim.purkinje.network, cardiosim.purkinje.grow): grown trees are reproducible for a seed,
connected and acyclic, on the surface they grow on, with bounded edges; the files round-trip (VTP written here and
read back, VTU/VTK through meshio, VTK XML binary forms and legacy POLYDATA read)."""

from __future__ import annotations

import base64
import zlib

import numpy as np
import pytest
from scipy.spatial import cKDTree

from cardiosim.purkinje import grow, network
from cardiosim.purkinje.network import Network, NetworkError

FAST = grow.GrowParameters(segment=0.04, spacing=0.15, seed=3)


@pytest.fixture(scope="module")
def biv():
    return grow.biv_surfaces(0.1)


@pytest.fixture(scope="module")
def tree(biv):
    return grow.conduction_system(*biv, FAST)


def test_the_same_seed_grows_the_same_network_and_another_seed_another(biv, tree):
    again = grow.conduction_system(*biv, FAST)
    assert np.array_equal(again.points, tree.points) and np.array_equal(again.edges, tree.edges)
    x, y = np.meshgrid(np.arange(0, 2.0001, 0.05), np.arange(0, 2.0001, 0.05))
    plane = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], axis=1)
    seeded = [grow.fractal_tree(plane, (1.0, 0.1, 0.0), (0.0, 1.0, 0.0),
                                grow.GrowParameters(segment=0.05, spacing=0.15, generations=4, seed=s))
              for s in (1, 1, 2)]
    assert np.array_equal(seeded[0].points, seeded[1].points)
    assert seeded[2].n_nodes != seeded[0].n_nodes or not np.array_equal(seeded[2].points, seeded[0].points)


def test_a_grown_network_is_a_tree_on_the_endocardium(biv, tree):
    lv, rv, root = biv
    assert tree.is_tree() and tree.components() == 1
    assert np.allclose(tree.points[tree.root], root) and tree.degree[tree.root] == 1
    assert set(np.unique(tree.data["part"])) == set(grow.PARTS.values())
    # the terminals are the leaves: PMJ candidates, on the endocardium within the cloud's spacing (0.1 cm)
    leaves = np.flatnonzero(tree.degree == 1)
    assert set(tree.terminals) == set(leaves) - {tree.root}
    assert len(tree.terminals) > 50
    on = tree.data["part"] >= grow.PARTS["lv_fascicle"]
    for part, cloud in (("lv", lv), ("rv", rv)):
        nodes = np.isin(tree.data["part"], [grow.PARTS[f"{part}_fascicle"], grow.PARTS[f"{part}_tree"]])
        dist, _ = cKDTree(cloud).query(tree.points[nodes])
        assert dist.max() <= 0.1 + 1e-9, part
    assert on[tree.terminals].all()
    # edges: bounded by the growth step (projection onto the surface shortens some, none beyond 2 steps)
    assert 0.25 * FAST.segment < tree.lengths.min() and tree.lengths.max() < 2 * FAST.segment
    # the His bundle is straight, his_length long, from the root towards the apex
    his = tree.data["part"] == grow.PARTS["his"]
    assert np.ptp(tree.points[his][:, :2], axis=0).max() < 1e-12
    assert tree.points[his][:, 2].max() - tree.points[his][:, 2].min() == pytest.approx(FAST.his_length)


@pytest.mark.parametrize("cut, gone, side", [("lbb", ("lbb", "lv_fascicle", "lv_tree"), "rv"),
                                             ("rbb", ("rbb", "rv_fascicle", "rv_tree"), "lv")])
def test_a_blocked_bundle_branch_is_cut_with_all_it_feeds(biv, tree, cut, gone, side):
    """block = ["lbb"]: the network without the left bundle, its fascicles and tree; the His bundle and the right
    side node for node the unblocked network's (the same random numbers)."""
    blocked = grow.conduction_system(*biv, grow.GrowParameters(segment=0.04, spacing=0.15, seed=3, block=(cut,)))
    assert blocked.is_tree() and np.allclose(blocked.points[blocked.root], tree.points[tree.root])
    part, full = blocked.data["part"], tree.data["part"]
    assert not np.isin(part, [grow.PARTS[g] for g in gone]).any()
    kept = [grow.PARTS[k] for k in ("his", f"{side[0]}bb", f"{side}_fascicle", f"{side}_tree")]
    assert np.array_equal(blocked.points, tree.points[np.isin(full, kept)])
    assert blocked.n_nodes == np.isin(full, kept).sum() and len(blocked.terminals) > 0
    with pytest.raises(NetworkError, match="allowed: lbb, rbb"):
        grow.GrowParameters(block=("lafb",)).check()
    with pytest.raises(NetworkError, match="block_distal 'keep' is not one of drop, retrograde"):
        grow.GrowParameters(block=("lbb",), block_distal="keep").check()
    with pytest.raises(NetworkError, match="block one of"):
        grow.GrowParameters(block=("lbb", "rbb")).check()


def test_a_blocked_branch_kept_for_retrograde_activation_is_detached_at_the_cut(biv, tree):
    """block_distal = "retrograde": every node of the unblocked network, one edge fewer (the cut where the left
    bundle leaves the His bundle), two pieces, and no junction at the cut's distal end; the cable's tree solve runs
    on the two trees."""
    from scipy import sparse
    from scipy.sparse.linalg import spsolve
    from cardiosim.purkinje import cable
    kept = grow.conduction_system(*biv, grow.GrowParameters(segment=0.04, spacing=0.15, seed=3, block=("lbb",),
                                                            block_distal="retrograde"))
    assert np.array_equal(kept.points, tree.points) and kept.n_edges == tree.n_edges - 1
    assert kept.components() == 2 and kept.is_forest() and not kept.is_tree() and kept.detached
    (cut,) = {tuple(e) for e in tree.edges.tolist()} - {tuple(e) for e in kept.edges.tolist()}
    his, lbb = cut if tree.data["part"][cut[0]] == grow.PARTS["his"] else cut[::-1]
    assert tree.data["part"][his] == grow.PARTS["his"] and tree.data["part"][lbb] == grow.PARTS["lbb"]
    assert not kept.pmj[lbb] and np.array_equal(np.delete(kept.pmj, lbb), np.delete(tree.pmj, lbb))
    assert np.isinf(kept.distance()[kept.data["part"] == grow.PARTS["lv_tree"]]).all()
    fine = kept.refine(0.02)
    assert fine.detached and fine.components() == 2
    g = np.full(fine.n_edges, 2.0)
    L = fine.adjacency(g)
    A = (sparse.diags(1.0 + np.asarray(L.sum(axis=1)).ravel()) - L).tocsc()
    b = np.random.default_rng(1).random(fine.n_nodes)
    assert np.allclose(cable.TreeSolve(fine, A.diagonal(), -g).solve(b), spsolve(A, b), rtol=1e-12, atol=0)
    with pytest.raises(NetworkError, match="2 pieces"):
        Network(kept.points, kept.edges, kept.root).check()


def test_a_geometry_files_endocardia_are_in_the_runs_coordinates(tmp_path, biv):
    # what purkinje.grow reads: the surfaces of a cardiosim geometry file, placed by its origin and spacing
    from cardiosim.domain import anatomy
    box, fields = anatomy.idealised_biv(0.1)
    anatomy.write(tmp_path / "biv.h5", box, fields, "biv")
    lv, rv, h = grow.geometry_surfaces(tmp_path / "biv.h5")
    assert h == 0.1
    for got, want in ((lv, biv[0]), (rv, biv[1])):
        assert np.array_equal(np.sort(got, axis=0), np.sort(want, axis=0))
    assert np.allclose(grow.septal_root(lv, rv, h=h), biv[2])


def test_a_fractal_tree_on_a_plane_stays_on_it():
    x, y = np.meshgrid(np.arange(0, 3.0001, 0.05), np.arange(0, 3.0001, 0.05))
    plane = np.stack([x.ravel(), y.ravel(), np.zeros(x.size)], axis=1)
    t = grow.fractal_tree(plane, (1.5, 0.1, 0.0), (0.0, 1.0, 0.0),
                          grow.GrowParameters(segment=0.05, spacing=0.15, branch_length=0.4, generations=6, seed=1))
    assert t.is_tree()
    assert np.abs(t.points[:, 2]).max() < 1e-12
    assert t.points[:, :2].min() > -0.05 and t.points[:, :2].max() < 3.05
    assert 2 < len(t.terminals) <= 2 ** 6
    # the branches keep their distance: nodes of different branches far from their junctions are >= spacing apart
    d = t.distance()
    assert d.max() > 1.0


def test_vtp_round_trip(tmp_path, tree):
    act = np.linspace(0.0, 30.0, tree.n_nodes)
    path = network.write(tree, tmp_path / "tree.vtp", {"activation_time": act})
    back = network.read(path)
    assert np.array_equal(back.points, tree.points)
    assert np.array_equal(back.edges, tree.edges)
    assert back.root == tree.root and np.array_equal(back.pmj, tree.pmj)
    assert np.array_equal(back.data["part"], tree.data["part"])
    assert np.array_equal(back.data["activation_time"], act)
    assert "distance" not in back.data      # written for ParaView, recomputed on reading


@pytest.mark.parametrize("suffix", [".vtu", ".vtk"])
def test_meshio_round_trip(tmp_path, tree, suffix):
    net = Network(tree.points, tree.edges, tree.root, radius=np.linspace(0.001, 0.003, tree.n_edges),
                  data={"part": tree.data["part"]})
    back = network.read(network.write(net, tmp_path / f"tree{suffix}"))
    assert np.allclose(back.points, net.points, rtol=0, atol=1e-12)
    assert np.array_equal(back.edges, net.edges) and back.root == net.root
    assert np.array_equal(back.pmj, net.pmj)
    assert np.allclose(back.radius, net.radius)


def _polyline_vtp(points, lines, fmt: str, header="UInt32") -> str:
    """A VTP file as another tool might write it: polylines (a branch repeating its parent's point), its arrays
    ascii, inline base64 (zlib-compressed), or appended raw."""
    conn = np.concatenate(lines).astype(np.int64)
    offs = np.cumsum([len(x) for x in lines]).astype(np.int64)
    pts = np.asarray(points, dtype=np.float32)
    h = np.dtype("<u4" if header == "UInt32" else "<u8")
    if fmt == "ascii":
        def arr(a, typ, name="", nc=1):
            return (f'<DataArray type="{typ}" Name="{name}" NumberOfComponents="{nc}" format="ascii">'
                    + " ".join(map(str, a.ravel())) + "</DataArray>")
        comp, appended = "", ""
    elif fmt == "zlib":
        def arr(a, typ, name="", nc=1):
            raw = a.tobytes()
            c = zlib.compress(raw)
            hdr = np.array([1, len(raw), len(raw), len(c)], dtype=h).tobytes()
            text = base64.b64encode(hdr).decode() + base64.b64encode(c).decode()    # encoded apart, as VTK does
            return f'<DataArray type="{typ}" Name="{name}" NumberOfComponents="{nc}" format="binary">{text}</DataArray>'
        comp, appended = ' compressor="vtkZLibDataCompressor"', ""
    else:
        blobs = []

        def arr(a, typ, name="", nc=1):
            off = sum(len(b) for b in blobs)
            raw = a.tobytes()
            blobs.append(np.array([len(raw)], dtype=h).tobytes() + raw)
            return (f'<DataArray type="{typ}" Name="{name}" NumberOfComponents="{nc}" format="appended" '
                    f'offset="{off}"/>')
        comp = ""
    body = (f'<Piece NumberOfPoints="{len(pts)}" NumberOfLines="{len(lines)}">'
            f'<Points>{arr(pts, "Float32", "Points", 3)}</Points>'
            f'<Lines>{arr(conn, "Int64", "connectivity")}{arr(offs, "Int64", "offsets")}</Lines></Piece>')
    head = (f'<?xml version="1.0"?><VTKFile type="PolyData" version="1.0" byte_order="LittleEndian" '
            f'header_type="{header}"{comp}><PolyData>{body}</PolyData>')
    if fmt == "appended":
        return head, b"".join(blobs)
    return head + "</VTKFile>"


@pytest.mark.parametrize("fmt", ["ascii", "zlib", "appended"])
def test_vtp_polylines_from_other_tools(tmp_path, fmt):
    # a trunk and two branches, each branch a polyline starting at a copy of the trunk's end point
    points = [[0, 0, 0], [0, 0, -0.5], [0, 0, -1.0], [0, 0, -1.0], [0.3, 0, -1.3], [0, 0, -1.0], [-0.3, 0, -1.3]]
    lines = [np.array([0, 1, 2]), np.array([3, 4]), np.array([5, 6])]
    made = _polyline_vtp(points, lines, fmt)
    path = tmp_path / "other.vtp"
    if fmt == "appended":
        head, blob = made
        path.write_bytes(head.encode() + b'<AppendedData encoding="raw">_' + blob + b"</AppendedData></VTKFile>")
    else:
        path.write_text(made)
    net = network.read(path, units="cm")
    assert net.n_nodes == 5 and net.n_edges == 4 and net.is_tree()
    assert net.root == 0 and sorted(net.terminals) == [3, 4]
    assert net.degree[2] == 3
    mm = network.read(path, units="mm")
    assert np.allclose(mm.points, net.points * 0.1)


def test_legacy_polydata(tmp_path):
    path = tmp_path / "legacy.vtk"
    path.write_text("# vtk DataFile Version 3.0\nnet\nASCII\nDATASET POLYDATA\nPOINTS 4 float\n"
                    "0 0 0  1 0 0  2 0 0  1 1 0\nLINES 2 7\n3 0 1 2\n2 1 3\n"
                    "POINT_DATA 4\nSCALARS root int 1\nLOOKUP_TABLE default\n0 0 1 0\n")
    net = network.read(path)
    assert net.n_nodes == 4 and net.n_edges == 3 and net.root == 2
    assert sorted(net.terminals) == [0, 3]


def test_refine_keeps_the_tree_and_its_lengths(tree):
    fine = tree.refine(0.01)
    assert fine.is_tree() and fine.lengths.max() <= 0.01 + 1e-12
    assert fine.lengths.sum() == pytest.approx(tree.lengths.sum(), rel=1e-12)
    assert np.array_equal(fine.points[:tree.n_nodes], tree.points)
    assert np.array_equal(fine.terminals, tree.terminals) and fine.root == tree.root
    assert np.allclose(fine.distance()[:tree.n_nodes], tree.distance(), rtol=1e-12, atol=1e-12)


def test_networks_a_cable_cannot_run_on_are_refused(tmp_path):
    with pytest.raises(NetworkError, match="2 pieces"):
        Network([[0, 0, 0], [1, 0, 0], [2, 0, 0], [3, 0, 0]], [[0, 1], [2, 3]]).check()
    with pytest.raises(NetworkError, match="zero length"):
        Network([[0, 0, 0], [0, 0, 0]], [[0, 1]]).check()
    with pytest.raises(NetworkError, match="no such file"):
        network.read(tmp_path / "missing.vtp")
    (tmp_path / "bad.vtp").write_text("<VTKFile type='UnstructuredGrid'/>")
    with pytest.raises(NetworkError, match="not PolyData"):
        network.read(tmp_path / "bad.vtp")
    with pytest.raises(NetworkError, match="spacing"):
        grow.GrowParameters(spacing=0.01, segment=0.02).check()
