"""[purkinje] on every path of a run: several ranks (the network on rank 0, the PMJs' tissue Vm gathered there and
scattered back; a 1D strand, and a 2D sheet split across x), the grouped placement, checkpoints and restarts, the
bidomain equations.

The tissue is a 1D strand, x = 0.5 ... 1 cm; a 0.5 cm Purkinje cable comes down the y axis onto its middle
(x = 0.75 cm), whose PMJ spreads over the eleven nodes within 0.055 cm: on two ranks they lie on both. The
strand is a sink on both sides of the PMJ: a bundle of four fibres and R = 100 kOhm conduct into it."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from conftest import run_cli
from test_purkinje_run import grown_biv_config
from cardiosim.config import tomlwrite
from cardiosim.purkinje import cable, coupling, network

MS = {"tau_close": 15.0}
# Tight solver tolerances, so that runs on 1 and 2 ranks can be compared to round-off (tests/test_restart.py).
TIGHT = ["--", "-parabolic_ksp_rtol", "1e-13"]


def tight(equations: str) -> list[str]:
    return TIGHT + ["-elliptic_ksp_rtol", "1e-13"] * (equations == "bidomain")


def config(fibre: Path, **sections) -> dict:
    data = {"simulation": {"equations": "monodomain", "duration": 20.0, "dt": 0.01, "progress_interval": 0,
                           "time_scheme": "backward-euler"},
            "grid": {"size": [0.5], "spacing": 0.01, "origin": [0.5]},
            "tissue": {"sigma_il": 2.72, "sigma_el": 2.72, "sigma_it": 2.72, "sigma_et": 2.72},
            "cell": {"model": "mitchell-schaeffer", "parameters": MS, "backend": "numpy"},
            "purkinje": {"network": str(fibre), "model": "mitchell-schaeffer", "parameters": MS,
                         "integrator": "forward-euler", "fibres": 4.0, "pmj_resistance": 100.0, "pmj_radius": 0.055,
                         "pmj_depth": 0.01, "stimulus": {"current_density": -100.0, "radius": 0.05}},
            "probe": [{"name": "end", "position": [1.0]}],
            "output": {"interval": 5.0}}
    for name, keys in sections.items():
        data[name] = {**data.get(name, {}), **keys}
    return data


@pytest.fixture(scope="module")
def fibre(tmp_path_factory):
    path = tmp_path_factory.mktemp("purkinje-paths") / "fibre.vtp"
    return network.write(cable.straight(0.5, 0.05, direction=(0.0, -1.0, 0.0), start=(0.75, 0.5, 0.0)), path)


def write_config(path: Path, data: dict) -> Path:
    path.write_text(tomlwrite.dumps(data))
    return path


def datasets(path) -> dict:
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(lambda name, obj: out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None)
    return out


def run(cfg: Path, out: Path, *extra, np: int = 1) -> dict:
    run_cli(["run", cfg, "--quiet", "--output", out, *extra], np=np, check=True)
    return datasets(out)


def agree(a: dict, b: dict, rel: float) -> None:
    """The two runs' fields, probes, maps and network arrays within ``rel`` of each one's largest value; the same
    NaNs."""
    assert sorted(a) == sorted(b)
    for name in a:
        if name.startswith(("fields/", "probes/", "maps/", "purkinje/")) and a[name].dtype.kind == "f":
            x, y = a[name], b[name]
            assert np.array_equal(np.isnan(x), np.isnan(y)), name
            if np.isnan(x).all():
                continue
            scale = max(float(np.nanmax(np.abs(x))), 1.0)
            assert float(np.nanmax(np.abs(x - y))) <= rel * scale, name


@pytest.mark.mpi
@pytest.mark.parametrize("equations", ["monodomain", "bidomain"])
@pytest.mark.slow
def test_two_ranks_equal_one(tmp_path, fibre, equations):
    """The PMJ's eleven tissue nodes on both ranks: the same run to the solvers' tolerance."""
    cfg = write_config(tmp_path / "run.toml", config(fibre, simulation={
        "equations": equations, "duration": 20.0, "dt": 0.01, "progress_interval": 0, "time_scheme": "backward-euler"}))
    one = run(cfg, tmp_path / "one.h5", *tight(equations))
    two = run(cfg, tmp_path / "two.h5", *tight(equations), np=2)
    with h5py.File(tmp_path / "two.h5") as f:
        assert '"mpi_ranks": 2' in f.attrs["layout"]
    agree(one, two, 1e-10)
    act = one["purkinje/activation_time"]
    tissue = one["maps/activation_time"]
    assert np.isfinite(act).all() and np.isfinite(tissue).all()
    assert np.argmin(tissue) == 25                                     # the wave starts at the PMJ, x = 0.75 cm
    assert one["purkinje/pmj_anterograde_delay"][0] > 0


@pytest.mark.mpi
def test_grouped_placement_equals_cpu(tmp_path, fibre):
    """cell.placement = "grouped" on 2 ranks (one group: rank 0 integrates every tissue cell) gives the cpu
    placement's numbers bit for bit, as without a network (tests/test_placement.py)."""
    cpu = run(write_config(tmp_path / "cpu.toml", config(fibre)), tmp_path / "cpu.h5", *TIGHT, np=2)
    grouped = run(write_config(tmp_path / "grouped.toml", config(fibre, cell={
        "model": "mitchell-schaeffer", "parameters": MS, "backend": "numpy", "placement": "grouped"})),
        tmp_path / "grouped.h5", *TIGHT, np=2)
    agree(cpu, grouped, 0.0)


@pytest.mark.parametrize("ranks", [1, pytest.param(2, marks=pytest.mark.mpi)])
def test_restart_is_bit_identical(tmp_path, fibre, ranks):
    """A checkpoint at 7.5 ms, while the wave crosses the PMJ (the terminal activates at about 7.4 ms, the tissue
    next to it at 7.7), restarted to the end: every dataset equals the uninterrupted run's bit for bit, the
    network's included."""
    full, ckpt = restarted_equals_full(tmp_path, config(fibre), ranks)
    with h5py.File(ckpt) as c:
        assert c["purkinje/states"].shape == (2, 51)
        # between the terminal's activation and its tissue side's: the restart carries the junction across
        assert np.isfinite(c["purkinje/activation"][...]).all()
        assert np.isnan(c["purkinje/pmj_tissue_activation"][...]).all()
    assert np.isfinite(full["purkinje/pmj_anterograde_delay"]).all()


def restarted_equals_full(tmp_path, data: dict, ranks: int) -> tuple[dict, Path]:
    """The run of ``data`` uninterrupted, and again with a checkpoint at 7.5 ms restarted to the end: every dataset
    of the two equal bit for bit; returns the full run's datasets and the checkpoint's path."""
    cfg = write_config(tmp_path / "run.toml", data)
    full = run(cfg, tmp_path / "full.h5", *TIGHT, np=ranks)
    part = tmp_path / "part.h5"
    run(cfg, part, "--set", "simulation.duration=12.0", "--set", "checkpoint.interval=7.5", *TIGHT, np=ranks)
    ckpt = tmp_path / "part.ckpt.h5"
    with h5py.File(ckpt) as c:
        assert float(c.attrs["t"]) == 7.5
    restarted = run(cfg, part, "--restart", ckpt, *TIGHT, np=ranks)
    assert sorted(full) == sorted(restarted)
    for name in full:
        assert np.array_equal(full[name], restarted[name], equal_nan=True), name
    return full, ckpt


def test_a_checkpoint_without_the_network_is_refused(tmp_path, fibre):
    """[purkinje] but a checkpoint with no network's state (a file put together from pieces): one line."""
    cfg = write_config(tmp_path / "run.toml", config(fibre))
    out = tmp_path / "part.h5"
    run(cfg, out, "--set", "simulation.duration=2.0", "--set", "checkpoint.interval=1.0")
    ckpt = tmp_path / "part.ckpt.h5"
    from cardiosim.output import checkpoint
    with h5py.File(ckpt, "r+") as c:
        del c["purkinje"]
        checkpoint.seal(c)                 # its checksums made again: only the missing piece is wrong
    proc = run_cli(["run", cfg, "--quiet", "--output", out, "--restart", ckpt])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().count("\n") == 0 and "holds no state of the Purkinje network" in proc.stderr


def by_hand(equations: str, splitting: str = "godunov", T: float = 20.0, dt: float = 0.01):
    """The run's split steps written out on the strand: the junction, the Purkinje cable (refined as the run
    refines the file's), the tissue's cells, then its diffusion (Strang: half the cells' step before it, half
    after, in the cable as in the tissue): monodomain (αM + K_m)V' = αM V*, or bidomain
    (αM + K_i)V' = αM V* − K_i φe with φe of the last step, (K_i + K_e)φe' = −K_i V' of zero mean; Q1 stiffness and
    lumped mass on the 51 nodes (h = 0.01 cm), σ_i = σ_e = 2.72 mS/cm, χ = 1400 /cm, Cm = 1 µF/cm², backward Euler.
    Returns the activation times (network sorted by y, tissue by x)."""
    ms = cable.make_model("mitchell-schaeffer", parameters=MS)
    fib = cable.straight(0.5, 0.01, direction=(0.0, -1.0, 0.0), start=(0.75, 0.5, 0.0))
    c = cable.Cable(fib, ms, dt=dt, fibres=4.0, stimulus=cable.Stimulus(current_density=-100.0, radius=0.05),
                    splitting=splitting)
    react = dt / 2 if splitting == "strang" else dt
    slab = cable.straight(0.5, 0.01, start=(0.5, 0.0, 0.0))
    t = cable.Cable(slab, ms, dt=dt, chi=1400.0, radius=np.sqrt(1e-4 / np.pi))     # its cells, volumes, C
    j = coupling.Junctions(fib.terminals, fib.points[fib.terminals], slab.points, 0.055, 100.0, c.C[fib.terminals],
                           coupling.tissue_capacitance(t.volume, 1.0, 1400.0), t.volume, dt)
    n, h = slab.n_nodes, 0.01
    mass = np.full(n, h)
    mass[[0, -1]] = h / 2
    lap = 2 * np.eye(n) - np.eye(n, k=1) - np.eye(n, k=-1)
    lap[0, 0] = lap[-1, -1] = 1.0
    Ki = Ke = 2.72 / h * lap
    Km = 1.36 / h * lap
    alpha = 1400.0 / dt
    phi = np.zeros(n)
    for s in range(round(T / dt)):
        j.step(c.V, t.V)
        c.step(s * dt)
        t.react(s * dt, react, 1)
        if equations == "monodomain":
            t.V[:] = np.linalg.solve(alpha * np.diag(mass) + Km, alpha * mass * t.V)
        else:
            t.V[:] = np.linalg.solve(alpha * np.diag(mass) + Ki, alpha * mass * t.V - Ki @ phi)
            phi = np.linalg.lstsq(Ki + Ke, -Ki @ t.V, rcond=None)[0]
            phi -= mass @ phi / mass.sum()
        if splitting == "strang":
            t.react(s * dt + dt / 2, dt / 2, 1)
        t._activation(s * dt)
    return c.activation[np.argsort(-fib.points[:, 1])], t.activation


@pytest.mark.parametrize("equations, splitting", [("monodomain", "godunov"), ("bidomain", "godunov"),
                                                   ("monodomain", "strang"), ("bidomain", "strang")])
def test_the_pmj_current_enters_either_equations_as_the_split_steps(tmp_path, fibre, equations, splitting):
    """The network on the strand, monodomain and bidomain, Godunov and Strang splitting, against the split steps by
    hand (by_hand): the same activation times, the network's and the tissue's, to 1e-8 ms."""
    data = config(fibre, simulation={"equations": equations, "duration": 20.0, "dt": 0.01, "progress_interval": 0,
                                     "time_scheme": "backward-euler", "splitting": splitting})
    got = run(write_config(tmp_path / "run.toml", data), tmp_path / "run.h5", *tight(equations))
    hand_p, hand_t = by_hand(equations, splitting)
    order = np.argsort(-got["purkinje/points"][:, 1])
    np.testing.assert_allclose(got["purkinje/activation_time"][order], hand_p, rtol=0, atol=1e-8)
    np.testing.assert_allclose(got["maps/activation_time"], hand_t, rtol=0, atol=1e-8)
    assert np.isfinite(hand_t).all() and np.argmin(hand_t) == 25
    if equations == "bidomain" and splitting == "godunov":
        # σ_e = σ_i: the bidomain is the monodomain of σ_i/2 but for its φe of the last step (O(dt): 0.0046 ms at
        # dt = 0.01 ms, 0.0015 at 0.005 by hand)
        mono_p, mono_t = by_hand("monodomain")
        assert 1e-4 < np.abs(got["maps/activation_time"] - mono_t).max() < 0.01
        assert np.abs(hand_p - mono_p).max() < 0.01


@pytest.fixture(scope="module")
def forked(tmp_path_factory):
    """A root above a 2D sheet's plane (z = 0.2 cm) forking into two terminals on it, at its centre and at
    (0.15, 0.25) cm."""
    pts = [[0.3, 0.15, 0.2], [0.3, 0.15, 0.1], [0.3, 0.15, 0.0], [0.15, 0.25, 0.0]]
    net = network.Network(pts, [[0, 1], [1, 2], [1, 3]], 0, name="fork")
    return network.write(net, tmp_path_factory.mktemp("purkinje-fork") / "fork.vtp")


def sheet_config(forked: Path, equations: str = "monodomain", **sections) -> dict:
    """The network ``forked`` over a 0.6 x 0.3 cm sheet (31 x 16 nodes), 20 ms, a stimulus at the sheet's edge
    besides the His bundle's; ``sections`` on top."""
    data = config(forked, simulation={"equations": equations, "duration": 20.0, "dt": 0.01, "progress_interval": 0,
                                      "time_scheme": "backward-euler"},
                  grid={"size": [0.6, 0.3], "spacing": 0.02, "origin": [0.0, 0.0]},
                  purkinje={**config(forked)["purkinje"], "pmj_radius": 0.05, "spacing": 0.02, "fibres": 20.0},
                  **sections)
    data["stimulus"] = [{"shape": "box", "lower": [0.0, 0.0], "upper": [0.04, 0.3], "duration": 1.0,
                         "current_density": -50.0}]
    data["probe"] = [{"name": "centre", "position": [0.3, 0.15]}]
    return data


@pytest.mark.mpi
@pytest.mark.parametrize("equations", ["monodomain", "bidomain"])
def test_a_sheet_on_two_ranks_equals_one(tmp_path, forked, equations):
    """A 0.6 x 0.3 cm sheet (31 x 16 nodes, split across x on two ranks), two PMJs, the central one over both ranks'
    nodes, a stimulus at the sheet's edge besides the His bundle's: on two ranks the PMJs' nodes arrive at rank 0
    out of natural order (each rank's block of columns in turn; the junctions take them in natural order), and the
    run equals the one-rank run to the solvers' tolerance."""
    cfg = write_config(tmp_path / "sheet.toml", sheet_config(forked, equations))
    one = run(cfg, tmp_path / "one.h5", *tight(equations))
    two = run(cfg, tmp_path / "two.h5", *tight(equations), np=2)
    with h5py.File(tmp_path / "two.h5") as f:
        assert '"dmda_procs": [2, 1]' in f.attrs["layout"]
    agree(one, two, 1e-10)
    assert one["purkinje/pmj"].sum() == 2 and np.isfinite(one["purkinje/activation_time"]).all()
    assert np.isfinite(one["maps/activation_time"]).mean() > 0.5
    assert np.isfinite(one["purkinje/pmj_tissue_activation_time"]).all()
    print(f"\n{equations}: network {np.nanmax(one['purkinje/activation_time']):.3f} ms, PMJs' tissue sides "
          f"{one['purkinje/pmj_tissue_activation_time']} ms, delays {one['purkinje/pmj_anterograde_delay']} / "
          f"{one['purkinje/pmj_retrograde_delay']} ms, tissue activated {np.isfinite(one['maps/activation_time']).mean():.2f}")


def test_an_interrupted_step_undoes_the_network_too(petsc, fibre):
    """A stop request in the middle of a long reaction (many substeps, chunked) puts the run back where its step
    began (Simulation._state_copy / _restore_copy): the network's arrays with the tissue's."""
    from cardiosim import api
    from cardiosim.simulation.loop import Simulation
    sim = Simulation(api.config(config(fibre)), write_output=False)
    for _ in range(600):                      # 6 ms: the wave on its way down the network
        sim.step()
    start, before = sim._state_copy(), sim.purkinje.state()
    for _ in range(50):
        sim.step()
    assert not np.array_equal(sim.purkinje.state()["states"], before["states"])
    sim._restore_copy(start)
    after = sim.purkinje.state()
    assert sorted(after) == sorted(before)
    for name in before:
        assert np.array_equal(after[name], before[name], equal_nan=True), name
    assert np.isnan(before["activation"]).any() and not np.isnan(before["activation"]).all()


@pytest.mark.mpi
def test_a_network_cell_gone_bad_stops_every_rank_in_one_line(tmp_path, fibre):
    """An absurd His stimulus: the network's cells (rank 0's) leave their range in the first step; both ranks stop
    with the one line of a bad cell, exit 3 (the failure rides on the step's collective: no rank is left waiting)."""
    data = config(fibre, purkinje={**config(fibre)["purkinje"], "stimulus": {"current_density": -1e7,
                                                                             "radius": 0.05}})
    proc = run_cli(["run", write_config(tmp_path / "bad.toml", data), "--quiet", "--output", tmp_path / "bad.h5"],
                   np=2, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 3, proc.stderr
    assert len(lines) == 1 and "purkinje network: cell state V" in lines[0] and "t = 0.01 ms" in lines[0]


@pytest.mark.slow
@pytest.mark.mpi
def test_a_grown_network_on_the_biv_on_two_ranks_equals_one(tmp_path):
    """The built-in BiV at 0.1 cm (a masked 3D grid, balanced by tissue on two ranks), a network grown on its
    endocardia (2977 nodes, 92 PMJs over 758 tissue nodes), 30 ms: two ranks equal one to the parabolic solver's
    tolerance (measured: Vm 5e-8 mV of 89, activation times 1e-9 ms, the network's 4e-11 ms)."""
    data = grown_biv_config(tmp_path)
    cfg = write_config(tmp_path / "biv.toml", data)
    one = run(cfg, tmp_path / "one.h5", *TIGHT)
    two = run(cfg, tmp_path / "two.h5", *TIGHT, np=2)
    with h5py.File(tmp_path / "two.h5") as f:
        assert '"tissue_per_rank": [3695, 3617]' in f.attrs["layout"]
    agree(one, two, 1e-8)
    assert one["purkinje/pmj"].sum() == 92 and np.isfinite(one["purkinje/pmj_anterograde_delay"]).sum() > 20
