"""The 12-lead pseudo-ECGs of two runs side by side (a column each, one lead a row, one voltage scale for all):
docs/examples/biv_purkinje_lbbb_ecg.png from run/biv-purkinje.toml and run/biv-lbbb.toml (make examples-purkinje).

    python tools/ecg_pair.py A.h5 B.h5 --labels normal LBBB --out figure.png

Each column's title gives its QRS as cardiosim.analysis.twelve_lead.qrs measures it (the RMS of the twelve leads
above 10 % of its peak), shaded in every lead.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import h5py
import numpy as np

from cardiosim.analysis import twelve_lead


def read(path: Path) -> tuple[np.ndarray, dict]:
    with h5py.File(path, "r") as f:
        if "ecg" not in f or not all(n in f["ecg"] for n in twelve_lead.LEADS):
            sys.exit(f"{path}: has no 12-lead ECG (ecg.twelve_lead)")
        return f["probes/time"][...], {n: f["ecg"][n][...] for n in twelve_lead.LEADS}


def draw(runs: list[tuple[str, np.ndarray, dict]], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(twelve_lead.LEADS), len(runs), figsize=(4.2 * len(runs), 13), sharex=True,
                             sharey=True, squeeze=False, constrained_layout=True)
    for col, (label, t, leads) in enumerate(runs):
        q = twelve_lead.qrs(t, leads)
        for row, name in enumerate(twelve_lead.LEADS):
            ax = axes[row, col]
            ax.axvspan(q["onset"], q["offset"], color="0.9", lw=0)
            ax.axhline(0.0, color="0.6", lw=0.5)
            ax.plot(t, leads[name], color="k", lw=1.0)
            if col == 0:
                ax.set_ylabel(f"{name} (mV)", fontsize=8)
            ax.tick_params(labelsize=7)
        axes[0, col].set_title(f"{label}: QRS {q['duration']:.1f} ms (shaded)", fontsize=10)
        axes[-1, col].set_xlabel("t (ms)")
    fig.suptitle("12-lead pseudo-ECG (infinite bath, electrodes of ecg.twelve_lead = \"biv\")", fontsize=10)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs=2, type=Path, help="two result files with the 12 leads")
    ap.add_argument("--labels", nargs=2, default=None, help="the columns' names (default: the files' stems)")
    ap.add_argument("--out", type=Path, required=True, help="the figure (.png, .svg, .pdf)")
    args = ap.parse_args(argv)
    labels = args.labels or [p.stem for p in args.files]
    draw([(lab, *read(p)) for lab, p in zip(labels, args.files)], args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
