"""``cardiosim plot FILE``: figures of a result file, and VTU files (cardiosim.output.plot)."""

from __future__ import annotations

from cardiosim.cli import common

START = common.LOCAL


def add_parser(sub) -> None:
    pl = sub.add_parser("plot", help="PNGs of a result file: field maps, probe traces, activation and APD maps")
    pl.add_argument("file", help="HDF5 file of a run, or of cardiosim cell (a trace, restitution, population or "
                                 "concentration series)")
    pl.add_argument("--times", type=float, nargs="+", metavar="MS",
                    help="snapshot times to show (ms; the nearest snapshot); default: four spread over the run")
    pl.add_argument("--field", default="Vm", help="Vm (default) or phi_e")
    pl.add_argument("--out", help="directory for the PNGs (default: beside FILE)")
    pl.add_argument("--isochrones", type=float, metavar="MS",
                    help="spacing of the activation isochrones (ms; default: about ten lines; at most "
                         "200 lines)")
    pl.add_argument("--view", nargs="+", choices=("z", "y", "x"), metavar="AXIS",
                    help="3D: the middle slices drawn, by the axis they are normal to (z: the x-y plane, y, x; "
                         "default: z y, a short- and a long-axis section of a heart along z)")
    pl.add_argument("--range", type=float, nargs=2, metavar=("LO", "HI"),
                    help="the field's colour range (mV; default: Vm -90 to 40, phi_e symmetric)")
    pl.add_argument("--format", choices=("png", "svg", "pdf"), default="png", help="file format (default png)")
    pl.add_argument("--dpi", type=int, default=150, help="resolution of PNGs (default 150)")
    pl.add_argument("--beats", action="store_true", help="also draw the activation and APD maps of every beat (up "
                                                         "to four), from the snapshots (as fine as output.interval)")
    pl.add_argument("--vtu", action="store_true", help="also write the snapshots at --times as VTU files (meshio): "
                                                       "fields and maps as point data, for ParaView/VTK pipelines")
    pl.add_argument("--overwrite", action="store_true", help="replace existing figures")
    pl.add_argument("--trace", nargs="+", metavar="NAME", help="a file of cardiosim cell's paced trace: the states "
                    "or recorded intermediates drawn below V (default: Cai where the model has it)")
    mv = pl.add_argument_group("movie")
    mv.add_argument("--movie", action="store_true", help="also write a movie of --field over the snapshots: "
                    "FILE_<field>.mp4 (a GIF where no MP4 encoder is installed); 3D: the tissue's surface")
    mv.add_argument("--every", type=int, metavar="N", help="movie: every Nth snapshot (default: every one)")
    mv.add_argument("--frame-interval", type=float, metavar="MS",
                    help="movie: a frame every MS ms of simulated time (the nearest snapshots), instead of --every")
    mv.add_argument("--fps", type=float, default=10.0, help="movie: frames per second (default 10)")
    mv.add_argument("--movie-format", choices=("mp4", "gif"), help="movie: the file format (default mp4 where "
                    "imageio-ffmpeg is installed, else gif)")
    ar = pl.add_argument_group("arrhythmia analysis (2D; 3D: the first --view slice)")
    ar.add_argument("--phase", action="store_true", help="also draw the phase of --field (Hilbert transform) at "
                    "--times, its phase singularities marked")
    ar.add_argument("--tips", action="store_true", help="also draw the spiral tips' trajectories and write them as "
                    "FILE_tips.csv")
    ar.add_argument("--dominant-frequency", action="store_true", help="also draw the dominant frequency (FFT) and "
                    "the cycle length of every node")
    ar.add_argument("--window", type=float, nargs=2, metavar=("START", "END"),
                    help="the snapshots these analyses use (ms; default: all, which for a spiral includes the "
                         "stimuli that start it)")


def main(args) -> int:
    # lazy: h5py and NumPy, not for every verb's parser
    from cardiosim.output.cell_results import cell_kind
    if cell_kind(args.file) is not None:            # a file of cardiosim cell: figures of its own
        from cardiosim.output.cell_plot import plot_cell_main   # lazy: matplotlib
        return plot_cell_main(args)
    # lazy: matplotlib, h5py and NumPy, not for every verb's parser
    from cardiosim.output.plot import plot_main
    from cardiosim.output.movie import extras
    return plot_main(args, extras)
