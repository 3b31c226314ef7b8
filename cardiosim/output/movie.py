"""``cardiosim plot --movie``: a field's snapshots as an animation (MP4, or GIF where no MP4 encoder is there).

Each frame shows the field on the colour scale of ``cardiosim plot`` (cardiosim.output.plot.colour_range), the
snapshot's time (ms) and a scale bar (mm). 2D results are drawn as images, 1D as a curve over x, 3D as the surface
of the tissue (the faces between tissue and non-tissue nodes of /maps/tissue, or of the box without one), each face
coloured by its tissue node's value and shaded by its direction (docs/decisions/0064-movie-surface-by-faces.md).

MP4 (H.264) goes through the ffmpeg that the PyPI package imageio-ffmpeg carries (``pip install imageio-ffmpeg``,
cardiosim's ``movie`` extra); without it, GIF through Pillow (which matplotlib needs anyway). The movie is written
to ``.<name>.part`` beside its name and renamed into place when complete: a failed write or Ctrl-C leaves nothing
there (an earlier movie, with ``--overwrite``, stays as it was).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from cardiosim.output.plot import LABELS, Style, colour_range, name_of
from cardiosim.output.results import Results
from cardiosim.runtime import signals
from cardiosim.runtime.errors import SimulationError, UserError, io_reason
from cardiosim.runtime.resources import check_fits

MARK = "cardiosim plot --movie"      # in the movie's metadata: how --overwrite recognises one of ours
PROGRESS_S = 5.0                     # seconds between progress lines


@dataclass
class Movie:
    """What the movie shows: the field, which snapshots (every ``every``-th, or one every ``interval`` ms), at
    ``fps`` frames per second, as ``format`` (mp4, gif, or None: mp4 where an encoder is there, else gif); a 3D
    result seen from each (elevation, azimuth) of ``views`` (degrees; by default from the front and the back)."""
    field: str = "Vm"
    every: int | None = None
    interval: float | None = None
    fps: float = 10.0
    format: str | None = None
    views: tuple = ((25.0, -60.0), (25.0, 120.0))


def mp4_available() -> bool:
    try:
        import imageio_ffmpeg          # optional (the movie extra): without it, GIFs
        imageio_ffmpeg.get_ffmpeg_exe()
    except (ImportError, RuntimeError):
        return False
    return True


def chosen_format(m: Movie) -> str:
    """The format the movie is written in: the one asked for (mp4 refused in one line where no encoder is there),
    else mp4 where imageio-ffmpeg gives an ffmpeg, else gif."""
    if m.format == "mp4" and not mp4_available():
        raise UserError("--movie-format mp4: no MP4 encoder here (pip install imageio-ffmpeg, or make setup); "
                        "--movie-format gif needs none")
    return m.format or ("mp4" if mp4_available() else "gif")


def check(r: Results, m: Movie) -> list[int]:
    """Every check of the movie's options against the file, before anything is written: the snapshot indices of
    its frames."""
    r.check_field(m.field)
    if r.n_snapshots == 0:
        raise UserError(f"--movie: {r.path} holds no complete snapshot")
    if not 0 < m.fps <= 120:
        raise UserError(f"--fps {m.fps:g}: must be above 0 and at most 120 frames per second")
    if m.every is not None and m.interval is not None:
        raise UserError("--every and --frame-interval: give one of them (every Nth snapshot, or one frame every "
                        "MS ms)")
    if m.every is not None:
        if m.every < 1:
            raise UserError(f"--every {m.every}: must be a whole number >= 1 (every Nth snapshot)")
        return list(range(0, r.n_snapshots, m.every))
    if m.interval is not None:
        gaps = np.diff(r.times)
        finest = float(gaps.min()) if gaps.size else 0.0
        if not m.interval > 0 or (finest and m.interval < finest * (1 - 1e-9)):
            raise UserError(f"--frame-interval {m.interval:g}: must be at least the snapshots' spacing, {finest:g} ms "
                            f"in {r.path}")
        want = np.arange(r.times[0], r.times[-1] + 1e-9 * max(1.0, abs(r.times[-1])), m.interval)
        idx = np.abs(r.times[None, :] - want[:, None]).argmin(axis=1)
        return sorted(set(int(i) for i in idx))
    return list(range(r.n_snapshots))


def nice_length(span_mm: float) -> float:
    """A round scale-bar length (1, 2 or 5 × 10^k mm) of about a fifth of ``span_mm``."""
    raw = max(span_mm, 1e-6) / 5
    k = 10.0 ** np.floor(np.log10(raw))
    return float(min((m * k for m in (1, 2, 5, 10)), key=lambda s: abs(np.log(s / raw))))


def _scale_bar(ax, span_cm: float):
    # matplotlib is imported where a figure is drawn (cardiosim.output.plot._pyplot chooses its backend first)
    from mpl_toolkits.axes_grid1.anchored_artists import AnchoredSizeBar
    mm = nice_length(10 * span_cm)
    bar = AnchoredSizeBar(ax.transData, mm / 10, f"{mm:g} mm", "lower right", pad=0.4, sep=3, frameon=True,
                          size_vertical=0, color="black", fontproperties={"size": 8})
    bar.patch.set_alpha(0.75)
    ax.add_artist(bar)


# -- 3D: the tissue's surface ----------------------------------------------------------------------------------
@dataclass
class Surface:
    """The visible boundary faces of a node mask seen from one direction (orthographic): their corners on the
    screen (cm), the flat index of each face's tissue node, and each face's shade (by its direction)."""
    corners: np.ndarray          # (faces, 4, 2)
    node: np.ndarray             # (faces,)
    shade: np.ndarray            # (faces,)


def _camera(elevation: float, azimuth: float):
    e, a = np.radians(elevation), np.radians(azimuth)
    towards = np.array([np.cos(e) * np.cos(a), np.cos(e) * np.sin(a), np.sin(e)])     # to the viewer, x y z
    right = np.array([-np.sin(a), np.cos(a), 0.0])
    up = np.cross(towards, right)
    return towards, right, up


def surface(mask: np.ndarray, spacing, axes, view=(25.0, -60.0)) -> Surface:
    """The faces between tissue and non-tissue nodes (or the box's edge) of ``mask`` ([z, y, x], True: tissue),
    each half a spacing from its tissue node, those facing the viewer only, farthest first (painter's order:
    the faces of one grid are equal squares, so their centres' depths order them)."""
    towards, right, up = _camera(*view)
    h = np.asarray(spacing, float)                                  # x y z
    origin = np.array([a[0] for a in axes], float)
    padded = np.pad(mask.astype(bool), 1)
    light = towards + 0.6 * up - 0.4 * right                        # from over the viewer's left shoulder
    light /= np.linalg.norm(light)
    corners, nodes, shades, depth = [], [], [], []
    for axis in range(3):                                           # x, y, z; the array axis is 2 - axis
        normal = np.zeros(3)
        for sign in (1, -1):
            normal[axis] = sign
            if normal @ towards <= 0:                               # faces looking away are hidden
                continue
            shifted = np.roll(padded, -sign, axis=2 - axis)[1:-1, 1:-1, 1:-1]
            k, j, i = np.nonzero(mask & ~shifted)
            centre = origin + np.column_stack([i, j, k]) * h
            centre[:, axis] += sign * h[axis] / 2
            a, b = [d for d in range(3) if d != axis]
            offsets = np.zeros((4, 3))
            offsets[:, a] = np.array([-1, 1, 1, -1]) * h[a] / 2
            offsets[:, b] = np.array([-1, -1, 1, 1]) * h[b] / 2
            pts = centre[:, None, :] + offsets[None]
            corners.append(np.stack([pts @ right, pts @ up], axis=-1))
            nodes.append(np.ravel_multi_index((k, j, i), mask.shape))
            shades.append(np.full(len(k), 0.55 + 0.45 * max(normal @ light, 0.0)))
            depth.append(centre @ towards)
    order = np.argsort(np.concatenate(depth)) if depth else np.zeros(0, int)
    cat = (lambda xs, shape: np.concatenate(xs)[order] if xs else np.zeros(shape))
    return Surface(cat(corners, (0, 4, 2)), cat(nodes, (0,)).astype(int), cat(shades, (0,)))


def tissue_mask(r: Results, first: np.ndarray) -> np.ndarray:
    """The tissue of a result ([z, y, x] bool): /maps/tissue where the run had a label image, else where the
    first frame has a value (a run killed before its maps: NaN outside the tissue)."""
    if "tissue" in r.maps:
        return r.map("tissue") > 0
    return np.isfinite(first)


# -- frames ----------------------------------------------------------------------------------------------------
def figure_size(r: Results, m: Movie) -> tuple[float, float]:
    """A frame's size (inches): 7 wide, as tall as a 2D sheet's aspect needs (2.5 to 9); 3D a panel per view, each
    about 4.5 inches square."""
    if r.dim == 3:
        return 1.3 + 4.5 * len(m.views), 5.0
    aspect = 0.8
    if r.dim == 2:
        x, y = r.axes
        aspect = float(y[-1] - y[0]) / max(float(x[-1] - x[0]), 1e-12)
    return 7.0, min(max(7.0 * 0.72 * aspect / 0.8, 2.5), 9.0)


class Frames:
    """A figure drawn once and updated for each snapshot; :meth:`rgb` gives the picture as an (h, w, 3) array
    whose sides are multiples of 16 (H.264's macroblocks)."""

    def __init__(self, plt, r: Results, m: Movie, style: Style):
        self.plt, self.r, self.m = plt, r, m
        self.ds = r.f["fields"][m.field]
        unit = self.ds.attrs.get("units", "mV")
        lo, hi = r.field_range(m.field)
        self.lo, self.hi, cmap = colour_range(m.field, [np.array([lo, hi])], style.vrange)
        self.cmap = plt.get_cmap(cmap).with_extremes(bad="0.85")
        label = f"{LABELS.get(m.field, m.field)} ({unit})"
        first = self.ds[0]
        self.fig = plt.figure(figsize=self._size(), dpi=style.dpi)
        n = len(m.views) if r.dim == 3 else 1
        self.axes = [self.fig.add_axes((0.11 + k * 0.74 / n, 0.1, 0.74 / n - 0.05 * (n > 1), 0.8)) for k in range(n)]
        self.ax = ax = self.axes[0]
        cax = self.fig.add_axes((0.88, 0.15, 0.025, 0.7))
        ax.set_title(f"{name_of(r)}: {LABELS.get(m.field, m.field)}", fontsize=10)     # 3D: _surface's own
        norm = plt.Normalize(self.lo, self.hi)
        if r.dim == 1:
            (self.line,) = ax.plot(r.axes[0], first, lw=1.5)
            ax.set_ylim(self.lo, self.hi)
            ax.set_xlabel("x (cm)")
            ax.set_ylabel(label)
            ax.grid(alpha=0.3)
            cax.set_visible(False)
        elif r.dim == 2:
            x, y = r.axes
            self.image = ax.imshow(first, origin="lower", extent=(x[0], x[-1], y[0], y[-1]), cmap=self.cmap,
                                   norm=norm, interpolation="nearest")
            ax.set_xlabel("x (cm)")
            ax.set_ylabel("y (cm)")
            _scale_bar(ax, float(x[-1] - x[0]))
        else:
            self._surface(first, norm)
        self.fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=self.cmap), cax=cax, label=label)
        self.stamp = ax.text(0.02, 0.97, "", transform=ax.transAxes, va="top", fontsize=10,
                             bbox=dict(boxstyle="round", fc="white", ec="0.5", alpha=0.8))
        # as many decimals as the snapshots' spacing needs (at least one): a stamp of fixed width does not jitter
        gaps = np.diff(r.times)
        finest = float(gaps[gaps > 0].min()) if (gaps > 0).any() else 1.0
        self.decimals = next((d for d in range(1, 6) if abs(round(finest, d) - finest) < 1e-9), 6)

    def _size(self) -> tuple[float, float]:
        return figure_size(self.r, self.m)

    def _surface(self, first, norm) -> None:
        from matplotlib.collections import PolyCollection   # matplotlib: where a figure is drawn (see _scale_bar)
        r, mask = self.r, tissue_mask(self.r, first)
        self.norm, self.surfs, self.faces = norm, [], []
        for ax, view in zip(self.axes, self.m.views):
            s = surface(mask, r.spacing, r.axes, view)
            faces = PolyCollection(s.corners, edgecolors="none", antialiaseds=False)
            ax.add_collection(faces)
            if len(s.corners):
                lo, hi = s.corners.reshape(-1, 2).min(axis=0), s.corners.reshape(-1, 2).max(axis=0)
                pad = 0.03 * float(max(hi - lo))
                ax.set_xlim(lo[0] - pad, hi[0] + pad)
                ax.set_ylim(lo[1] - pad, hi[1] + pad)
                _scale_bar(ax, float(hi[0] - lo[0]))
            ax.set_aspect("equal")
            ax.set_axis_off()
            ax.set_title(f"elevation {view[0]:g}°, azimuth {view[1]:g}°: {len(s.node)} faces", fontsize=9)
            self.surfs.append(s)
            self.faces.append(faces)
        self.fig.suptitle(f"{name_of(r)}: {LABELS.get(self.m.field, self.m.field)} on the tissue's surface",
                          fontsize=10)

    def rgb(self, i: int) -> np.ndarray:
        r = self.r
        a = self.ds[i]
        if r.dim == 1:
            self.line.set_ydata(a)
        elif r.dim == 2:
            self.image.set_data(a)
        else:
            values = a.ravel()
            for s, faces in zip(self.surfs, self.faces):
                colours = self.cmap(self.norm(np.ma.masked_invalid(values[s.node])))
                colours[:, :3] *= s.shade[:, None]
                faces.set_facecolor(colours)
        self.stamp.set_text(f"t = {r.times[i]:.{self.decimals}f} ms")
        self.fig.canvas.draw()
        img = np.asarray(self.fig.canvas.buffer_rgba())[..., :3]
        h, w = img.shape[:2]
        out = np.full((-(-h // 16) * 16, -(-w // 16) * 16, 3), 255, np.uint8)
        out[:h, :w] = img
        return out

    def close(self) -> None:
        self.plt.close(self.fig)


# -- writing ---------------------------------------------------------------------------------------------------
class _Mp4:
    def __init__(self, tmp: Path, size, fps: float):
        import imageio_ffmpeg          # optional (the movie extra): chosen_format has checked that it is there
        # "-f mp4": the temporary name's suffix (.part) does not say the container; faststart puts the index (and
        # the comment that marks the file as ours) at the start
        self.gen = imageio_ffmpeg.write_frames(str(tmp), size, fps=fps, codec="libx264", quality=7,
                                               macro_block_size=16, ffmpeg_log_level="error",
                                               output_params=["-f", "mp4", "-movflags", "+faststart",
                                                              "-metadata", f"comment={MARK}"])
        self.gen.send(None)

    def add(self, rgb: np.ndarray) -> None:
        self.gen.send(np.ascontiguousarray(rgb))

    def finish(self) -> None:
        self.gen.close()

    def abandon(self) -> None:
        try:
            self.gen.close()
        except Exception:           # ffmpeg already gone (Ctrl-C reaches it too): nothing left to close
            pass


class _Gif:
    def __init__(self, tmp: Path, size, fps: float):
        self.tmp, self.fps, self.frames = tmp, fps, []

    def add(self, rgb: np.ndarray) -> None:
        from PIL import Image          # Pillow, which matplotlib needs: loaded where a GIF is made
        self.frames.append(Image.fromarray(rgb).quantize(colors=256))    # a palette image: 1 byte a pixel kept

    def finish(self) -> None:
        first, *rest = self.frames
        first.save(self.tmp, format="GIF", save_all=True, append_images=rest, loop=0,
                   duration=max(int(round(1000 / self.fps)), 20), comment=MARK.encode())

    def abandon(self) -> None:
        self.frames = []


def write_movie(plt, r: Results, path: Path, m: Movie, idx: list[int], style: Style = Style()) -> Path:
    """The movie of ``m`` over the snapshots ``idx`` to ``path`` (its suffix: mp4 or gif), whole or not at all;
    a progress line on stderr every few seconds."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.part")
    frames = Frames(plt, r, m, style)
    writer = None
    start = last = time.monotonic()
    with signals.deferred_interrupt() as interrupt:      # Ctrl-C between frames, not inside matplotlib's draw
        try:
            first = frames.rgb(idx[0])
            interrupt.check()
            writer = (_Mp4 if path.suffix == ".mp4" else _Gif)(tmp, (first.shape[1], first.shape[0]), m.fps)
            writer.add(first)
            for n, i in enumerate(idx[1:], start=2):
                rgb = frames.rgb(i)
                interrupt.check()
                writer.add(rgb)
                now = time.monotonic()
                if now - last >= PROGRESS_S:
                    last = now
                    left = (now - start) / n * (len(idx) - n)
                    print(f"movie: frame {n} of {len(idx)} (t = {r.times[i]:g} ms), {now - start:.0f} s, about "
                          f"{left:.0f} s left", file=sys.stderr, flush=True)
            interrupt.check()
            writer.finish()
            writer = None
            tmp.replace(path)
        except OSError as e:
            interrupt.check()            # ffmpeg, stopped by the same Ctrl-C, broke the pipe: that is the interrupt
            raise SimulationError(f"--movie: cannot write {path} ({io_reason(e)}); nothing written there") from None
        finally:
            if writer is not None:
                writer.abandon()
            tmp.unlink(missing_ok=True)
        frames.close()
    return path


# -- cardiosim plot's options ----------------------------------------------------------------------------------
def extras(r: Results, args, out: Path, stem: str, style: Style, idx: list[int]) -> list[tuple]:
    """What --movie, --phase, --tips and --dominant-frequency add to ``cardiosim plot``, every option checked
    against the file first: [(kind of file for cardiosim.runtime.files.Target, path, draw(plt) -> path)]."""
    from cardiosim.output import rhythm   # lazy: SciPy (about a second to import) only where an analysis is asked for
    field, ext, plan = args.field, style.format, []
    movie_only = [o for o, v in (("--every", "every"), ("--frame-interval", "frame_interval"),
                                 ("--movie-format", "movie_format")) if getattr(args, v, None) is not None]
    if movie_only and not getattr(args, "movie", False):
        raise UserError(f"{movie_only[0]}: only with --movie")
    if getattr(args, "movie", False):
        m = Movie(field=field, every=args.every, interval=args.frame_interval, fps=args.fps,
                  format=args.movie_format)
        frames, fmt = check(r, m), chosen_format(m)
        if fmt == "gif":                # its frames are kept until the end, one byte a pixel
            w, h = figure_size(r, m)
            check_fits(len(frames) * w * h * style.dpi ** 2, f"--movie: {len(frames)} GIF frames of "
                       f"{w * style.dpi:.0f} x {h * style.dpi:.0f} pixels", "use --every, a lower --dpi or MP4")
        if fmt == "gif" and m.format is None:
            print("movie: no MP4 encoder here (pip install imageio-ffmpeg): writing a GIF", file=sys.stderr)
        plan.append((fmt, out / f"{stem}_{field}.{fmt}",
                     lambda plt, p: write_movie(plt, r, p, m, frames, style)))
    for flag, name in (("phase", "phase"), ("tips", "tips"), ("dominant_frequency", "dominant_frequency")):
        if getattr(args, flag, False) and r.dim == 1 and flag != "dominant_frequency":
            raise UserError(f"--{flag}: for 2D and 3D results; {r.path} is 1D")
    kind = "png" if ext == "png" else "figure"
    window = tuple(args.window) if getattr(args, "window", None) else None
    asked = [f for f in ("phase", "tips", "dominant_frequency") if getattr(args, f, False)]
    if window is not None and not asked:
        raise UserError("--window: only with --phase, --tips or --dominant-frequency")
    for flag in asked:
        rhythm.check(r, field, style.views, "--" + flag.replace("_", "-"), window)
    if "phase" in asked:
        plan.append((kind, out / f"{stem}_phase.{ext}",
                     lambda plt, p: rhythm.plot_phase(plt, r, idx, p, style, field, window)))
    if "tips" in asked:
        plan.append((kind, out / f"{stem}_tips.{ext}",
                     lambda plt, p: rhythm.plot_tips(plt, r, p, style, field, window)))
        plan.append(("tips-csv", out / f"{stem}_tips.csv",
                     lambda plt, p: rhythm.write_tips(r, p, field, style.views, window)))
    if "dominant_frequency" in asked:
        plan.append((kind, out / f"{stem}_dominant_frequency.{ext}",
                     lambda plt, p: rhythm.plot_dominant_frequency(plt, r, p, style, field, window)))
    return plan
