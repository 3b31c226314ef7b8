"""Labels for the tutorial's LV (docs/tutorial.md): the tissue of a `cardiosim geometry lv` file split into an
endocardial layer (label 2), the mid-wall (1) and an epicardial layer (3) by its transmural coordinate (0 at the
endocardium, 1 at the epicardium), written as a .npy label image for tissue.label_file.

    python run/lv-labels.py out/lv.h5 out/lv-labels.npy [--endo 0.15] [--epi 0.85]

Label 2 is where the tutorial's stimulus goes (the whole endocardium at once, standing in for the Purkinje network
that activates it within a few milliseconds in a real heart) and, with label 3, where its endo- and epicardial cells
are (cell.regions)."""

import argparse
from pathlib import Path

import h5py
import numpy as np


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("geometry", help="a cardiosim geometry file (cardiosim geometry lv ... --out GEO.h5)")
    p.add_argument("out", help="the label image to write (.npy)")
    p.add_argument("--endo", type=float, default=0.15, help="transmural coordinate below which is endocardium")
    p.add_argument("--epi", type=float, default=0.85, help="transmural coordinate above which is epicardium")
    a = p.parse_args()
    with h5py.File(a.geometry, "r") as f:
        tissue = f["labels"][()] > 0
        depth = f["transmural"][()]
    labels = np.where(tissue, 1, 0).astype(np.int32)
    labels[tissue & (depth < a.endo)] = 2
    labels[tissue & (depth > a.epi)] = 3
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    np.save(a.out, labels)
    n = [int(np.count_nonzero(labels == k)) for k in (1, 2, 3)]
    print(f"wrote {a.out}: {labels.shape[::-1]} nodes (x, y, z); tissue {sum(n)}: endocardium {n[1]}, mid-wall "
          f"{n[0]}, epicardium {n[2]}")


if __name__ == "__main__":
    main()
