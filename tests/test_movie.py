"""``cardiosim plot --movie`` and the arrhythmia figures (--phase, --tips, --dominant-frequency) on result files
made without a run (tests/synthetic.py): the frames hold the snapshots, the tips the known spiral's, and every
mistake is one line with nothing written."""

import csv
import subprocess
import sys

import numpy as np
import pytest

from cardiosim.analysis import arrhythmia as A
from cardiosim.output import movie, rhythm
from cardiosim.output.plot import Style, _pyplot
from cardiosim.output.results import Results
from synthetic import spiral, to_mv, write_result

H = 0.05
X = Y = np.arange(31) * H                   # 1.5 x 1.5 cm
CENTRE = (0.763, 0.712)                     # cm, inside a plaquette
T = np.arange(0.0, 400.0, 4.0)              # ms, 100 snapshots: four turns at 10 Hz


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("results")
    ph = spiral(X, Y, T, lambda t: (np.full_like(t, CENTRE[0]), np.full_like(t, CENTRE[1])), 2 * np.pi / 100)
    # a sheet at rest that depolarises uniformly, snapshot k at -85 + 1.2 k mV: its frames' colours are known
    ramp = (-85.0 + 1.2 * np.arange(20))[:, None, None] * np.ones((1, 12, 16))
    z, y, x = np.meshgrid(np.arange(12), np.arange(12), np.arange(12), indexing="ij")
    cube = (abs(x - 5.5) < 4) & (abs(y - 5.5) < 4) & (abs(z - 5.5) < 4)            # 8 x 8 x 8 nodes of tissue
    vm3 = np.where(cube[None], -85.0 + 10.0 * np.arange(6)[:, None, None, None], np.nan)
    return {"spiral": write_result(d / "spiral.h5", T, to_mv(ph), H, name="spiral"),
            "ramp": write_result(d / "ramp.h5", np.arange(20) * 2.0, ramp, 0.1, name="ramp"),
            "cube": write_result(d / "cube.h5", np.arange(6) * 1.0, vm3, 0.1, tissue=cube, name="cube"),
            "cable": write_result(d / "cable.h5", T, to_mv(ph[:, 0, :]), H, name="cable")}


def _plot(path, out, *extra):
    from cardiosim.cli import main
    return main(["plot", str(path), "--out", str(out), "--dpi", "40", *extra])       # small frames: quick


def _mp4_frames(path):
    import imageio_ffmpeg
    reader = imageio_ffmpeg.read_frames(str(path))
    meta = reader.__next__()
    w, h = meta["size"]
    frames = [np.frombuffer(f, np.uint8).reshape(h, w, 3) for f in reader]
    return meta, frames


def test_mp4_of_a_2d_spiral_every_other_snapshot(files, tmp_path, capsys):
    pytest.importorskip("imageio_ffmpeg")
    assert _plot(files["spiral"], tmp_path, "--movie", "--every", "2", "--fps", "12") == 0
    printed = capsys.readouterr().out.split()
    assert str(tmp_path / "spiral_Vm.mp4") in printed
    meta, frames = _mp4_frames(tmp_path / "spiral_Vm.mp4")
    assert len(frames) == 50 and meta["fps"] == 12
    assert meta["size"][0] % 16 == 0 and meta["size"][1] % 16 == 0
    assert not np.array_equal(frames[0], frames[1])                  # the spiral turns
    assert np.abs(frames[0].astype(int) - frames[25].astype(int)).mean() < 3   # 200 ms later: two turns, the same
    assert not list(tmp_path.glob(".*.part"))


def test_gif_frames_hold_the_snapshots(files, tmp_path):
    from PIL import Image
    plt = _pyplot()
    with Results(files["ramp"]) as r:
        m = movie.Movie(format="gif", interval=4.0)
        idx = movie.check(r, m)
        assert idx == list(range(0, 20, 2))                          # one frame every 4 ms of 2-ms snapshots
        frames = movie.Frames(plt, r, m, Style(dpi=60))
        assert frames.lo == -90.0 and frames.hi == 40.0              # cardiosim plot's Vm scale
        bars = [a for a in frames.ax.artists if type(a).__name__ == "AnchoredSizeBar"]
        assert len(bars) == 1 and bars[0].txt_label.get_text() == "2 mm"      # 1.5 cm wide: 2 mm is nearest a fifth
        frames.rgb(3)
        assert frames.stamp.get_text() == "t = 6.0 ms"
        # where the sheet is drawn, the frame's colour is the colour map's at that snapshot's value
        box = frames.ax.get_window_extent()
        cy, cx = int(frames.fig.bbox.height - box.y0 - box.height / 2), int(box.x0 + box.width / 2)
        frames.close()
        path = movie.write_movie(plt, r, tmp_path / "ramp_Vm.gif", m, idx, Style(dpi=60))
    gif = Image.open(path)
    assert gif.n_frames == len(idx) and b"cardiosim plot --movie" in gif.info.get("comment", b"")
    cmap = plt.get_cmap("viridis")
    for k, i in enumerate(idx):
        gif.seek(k)
        pixel = np.asarray(gif.convert("RGB"))[cy, cx] / 255.0
        want = np.asarray(cmap((-85.0 + 1.2 * i + 90.0) / 130.0)[:3])
        assert np.abs(pixel - want).max() < 0.03, (i, pixel, want)


def test_scale_bar_lengths():
    assert [movie.nice_length(mm) for mm in (15, 20, 100, 3.0, 400)] == [2, 5, 20, 0.5, 100]


def test_3d_surface_faces_of_a_cube(files, tmp_path):
    # seen from elevation 25°, azimuth -60°, a cube shows its +x, -y and +z faces: 3 x 8 x 8 node faces
    mask = np.zeros((12, 12, 12), bool)
    mask[2:10, 2:10, 2:10] = True
    axes = [np.arange(12) * 0.1] * 3
    s = movie.surface(mask, (0.1, 0.1, 0.1), axes, (25.0, -60.0))
    assert len(s.node) == 3 * 64
    k, j, i = np.unravel_index(s.node, mask.shape)
    assert mask[k, j, i].all() and ((i == 9) | (j == 2) | (k == 9)).all()
    assert len(np.unique(s.shade)) == 3                              # a shade per direction
    # the faces cover the projection of the cube's corners (half a spacing beyond the outer nodes)
    towards, right, up = movie._camera(25.0, -60.0)
    corners = np.array([[a, b, c] for a in (0.15, 0.95) for b in (0.15, 0.95) for c in (0.15, 0.95)])
    for d, axis in enumerate((right, up)):
        np.testing.assert_allclose([s.corners[..., d].min(), s.corners[..., d].max()],
                                   [(corners @ axis).min(), (corners @ axis).max()], atol=1e-12)
    assert _plot(files["cube"], tmp_path, "--movie", "--movie-format", "gif") == 0
    from PIL import Image
    assert Image.open(tmp_path / "cube_Vm.gif").n_frames == 6


@pytest.mark.slow
def test_3d_surface_of_1e5_faces_draws_a_frame_in_seconds(tmp_path):
    import time
    n = 150
    g = np.linspace(-1, 1, n)
    z, y, x = np.meshgrid(g, g, g, indexing="ij")
    r = np.sqrt(x * x + y * y + z * z)
    shell = (r < 0.95) & (r > 0.7) & (z < 0.8)
    vm = np.where(shell[None], -85.0 + 40 * (z[None] > np.array([-0.5, 0, 0.5])[:, None, None, None]), np.nan)
    path = write_result(tmp_path / "shell.h5", [0.0, 1.0, 2.0], vm, 2.0 / (n - 1), tissue=shell)
    plt = _pyplot()
    with Results(path) as res:
        frames = movie.Frames(plt, res, movie.Movie(), Style())
        assert len(frames.surfs) == 2 and min(len(s.node) for s in frames.surfs) > 60000
        start = time.monotonic()
        for i in range(3):
            frames.rgb(i)
        per_frame = (time.monotonic() - start) / 3
        frames.close()
    print(f"{[len(s.node) for s in frames.surfs]} faces: {per_frame:.2f} s a frame")
    assert per_frame < 5.0


def test_arrhythmia_figures_and_tip_table(files, tmp_path, capsys):
    assert _plot(files["spiral"], tmp_path, "--phase", "--tips", "--dominant-frequency", "--times", "100",
                 "200") == 0
    printed = capsys.readouterr().out.split()
    for name in ("spiral_phase.png", "spiral_tips.png", "spiral_tips.csv", "spiral_dominant_frequency.png"):
        assert str(tmp_path / name) in printed
        assert (tmp_path / name).stat().st_size > 100
    rows = list(csv.DictReader((tmp_path / "spiral_tips.csv").open()))
    kept = A.trusted(len(T), 100.0 / 4.0)                       # a quarter of the 100 ms cycle left out at each end
    assert len(rows) == kept.stop - kept.start and {r["track"] for r in rows} == {"0"}
    assert float(rows[0]["t_ms"]) == T[kept.start] and float(rows[-1]["t_ms"]) == T[kept.stop - 1]
    assert max(np.hypot(float(r["x_cm"]) - CENTRE[0], float(r["y_cm"]) - CENTRE[1]) for r in rows) <= H
    assert {r["charge"] for r in rows} == {"-1"}       # the phase grows in time: counter-clockwise turns are -1
    with Results(files["spiral"]) as r:
        df, resolution, cl, s = rhythm.dominant_frequency(r)
        assert resolution == pytest.approx(2.5) and np.abs(df - 10.0).max() <= resolution
        np.testing.assert_allclose(cl[np.isfinite(cl)], 100.0, atol=0.5)
        tracks = rhythm.tracks(r)[0]
        assert len(tracks) == 1 and tracks[0].lifetime == T[kept.stop - 1] - T[kept.start]


@pytest.mark.parametrize("extra, says", [
    (["--every", "3"], "--every: only with --movie"),
    (["--movie", "--every", "0"], "--every 0: must be a whole number >= 1"),
    (["--movie", "--every", "2", "--frame-interval", "8"], "--every and --frame-interval: give one of them"),
    (["--movie", "--frame-interval", "1"], "--frame-interval 1: must be at least the snapshots' spacing, 4 ms"),
    (["--movie", "--fps", "0"], "--fps 0: must be above 0"),
    (["--movie", "--field", "phi_e"], "--field phi_e: not in"),
])
def test_mistakes_are_one_line_and_nothing_is_written(files, tmp_path, capsys, extra, says):
    assert _plot(files["spiral"], tmp_path, *extra) == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.iterdir())


def test_analysis_mistakes(files, tmp_path, capsys):
    assert _plot(files["cable"], tmp_path, "--tips") == 2
    assert "--tips: for 2D and 3D results" in capsys.readouterr().err
    assert _plot(files["cube"], tmp_path, "--phase") == 2                   # 6 snapshots
    assert "--phase: needs at least 8 evenly spaced snapshots" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
    assert _plot(files["cable"], tmp_path, "--dominant-frequency") == 0   # 1D: curves over x


def test_an_analysis_larger_than_the_memory_is_refused(files, tmp_path, capsys, monkeypatch):
    from cardiosim.runtime import resources
    monkeypatch.setattr(resources, "available_memory", lambda: 10 ** 5)     # 0.1 MB: 100 x 961 x 8 B x 6 is 4.6 MB
    assert _plot(files["spiral"], tmp_path, "--tips") == 2
    err = capsys.readouterr().err.strip()
    assert "--tips: 100 snapshots of 961 nodes need about 0.00461 GB of memory, and 0.0001 GB are available" in err
    assert len(err.splitlines()) == 1 and not list(tmp_path.iterdir())
    # a GIF keeps its frames until the end: 20 frames of 7 x 4.62 inches at 40 dpi, 1 byte a pixel
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif") == 2
    err = capsys.readouterr().err.strip()
    assert "--movie: 20 GIF frames of 280 x 185 pixels need about 0.00103 GB" in err and not list(tmp_path.iterdir())


def test_existing_files_and_mp4_without_an_encoder(files, tmp_path, capsys, monkeypatch):
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif") == 0
    before = (tmp_path / "ramp_Vm.gif").read_bytes()
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif") == 2
    assert "ramp_Vm.png exists; pass --overwrite" in capsys.readouterr().err
    (tmp_path / "ramp_Vm.gif").write_bytes(b"GIF89a not ours")
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif", "--overwrite") == 2
    assert "is not a GIF movie written by cardiosim plot --movie" in capsys.readouterr().err
    (tmp_path / "ramp_Vm.gif").write_bytes(before)
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif", "--overwrite", "--every", "5") == 0
    monkeypatch.setattr(movie, "mp4_available", lambda: False)
    assert _plot(files["ramp"], tmp_path / "new", "--movie", "--movie-format", "mp4") == 2
    assert "--movie-format mp4: no MP4 encoder here" in capsys.readouterr().err
    assert _plot(files["ramp"], tmp_path / "new", "--movie") == 0          # falls back to a GIF, and says so
    assert "writing a GIF" in capsys.readouterr().err and (tmp_path / "new" / "ramp_Vm.gif").exists()


def test_ctrl_c_and_a_failed_write_leave_the_earlier_movie(files, tmp_path, capsys, monkeypatch):
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif") == 0
    before = (tmp_path / "ramp_Vm.gif").read_bytes()
    draw, calls = movie.Frames.rgb, []

    def interrupted(self, i):
        calls.append(i)
        if len(calls) == 4:
            raise KeyboardInterrupt
        return draw(self, i)

    monkeypatch.setattr(movie, "PROGRESS_S", 0.0)
    monkeypatch.setattr(movie.Frames, "rgb", interrupted)
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif", "--overwrite") == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "movie: frame 2 of 20" in err
    assert (tmp_path / "ramp_Vm.gif").read_bytes() == before and not list(tmp_path.glob(".*.part"))
    monkeypatch.setattr(movie.Frames, "rgb", draw)
    monkeypatch.setattr(movie, "PROGRESS_S", 1e9)

    def full(self):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(movie._Gif, "finish", full)
    assert _plot(files["ramp"], tmp_path, "--movie", "--movie-format", "gif", "--overwrite") == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "No space left on device" in err[0] and "nothing written there" in err[0]
    assert (tmp_path / "ramp_Vm.gif").read_bytes() == before and not list(tmp_path.glob(".*.part"))


def test_movie_and_analysis_import_neither_mpi_nor_petsc(files, tmp_path):
    code = (f"import sys; from cardiosim.cli import main; "
            f"assert main(['plot', {str(files['spiral'])!r}, '--out', {str(tmp_path)!r}, '--dpi', '40', '--movie', "
            f"'--every', '10', "
            f"'--phase', '--tips', '--dominant-frequency']) == 0; "
            f"bad = [m for m in ('mpi4py', 'petsc4py') if m in sys.modules]; assert not bad, bad")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr


def test_sigint_to_the_process_group_stops_an_mp4_cleanly(tmp_path):
    """Ctrl-C as a terminal sends it: SIGINT to cardiosim and to the ffmpeg it started, mid-movie."""
    import os
    import signal
    import time
    pytest.importorskip("imageio_ffmpeg")
    t = np.arange(0.0, 1200.0, 2.0)                                       # 600 frames: many seconds
    ph = spiral(X, Y, t, lambda s: (np.full_like(s, CENTRE[0]), np.full_like(s, CENTRE[1])), 2 * np.pi / 100)
    path = write_result(tmp_path / "long.h5", t, to_mv(ph), H, name="long")
    part = tmp_path / ".long_Vm.mp4.part"
    proc = subprocess.Popen([sys.executable, "-m", "cardiosim", "plot", str(path), "--out", str(tmp_path), "--dpi",
                             "40", "--movie"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    deadline = time.monotonic() + 120
    while not part.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert part.exists(), proc.communicate()
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted" in err and "Traceback" not in err
    assert not part.exists() and not (tmp_path / "long_Vm.mp4").exists()
