"""Published activation times of the Niederer et al. 2011 slab: mean ± sample SD over the eleven participating codes
at dt = 0.01 ms, per dx, by point position (mm).

Source: the paper's supplementary material (rsta20110139supp1.pdf, doi:10.1098/rsta.2011.0139), as transcribed in
the public repository vittal2026/HrdayaPy, experiments/experiment_2/niederer_values.py (commit 4f6c328c3ced), which
states it tabulates "each of the 11 participating codes' activation times at P1-P9 for every dx/dt combination" and
gives "mean +/- sample SD (ddof=1) across the 11 codes". We have not read the supplementary itself: check these rows
against it before citing them as the paper's. Implementations number P2–P7 differently, so points are keyed here by
position; cardiosim.bench.niederer.POINTS maps our labels to positions. The P1 (stimulus corner) SD is not given.
"""

# position (x, y, z) in mm -> (mean, SD) in ms, per dx in mm
ELEVEN_CODES_DT001 = {
    0.1: {(20, 7, 3): (44.93, 3.22), (10, 3.5, 1.5): (20.50, 1.30), (0, 0, 3): (8.95, 0.56),
          (0, 7, 0): (29.76, 1.65), (20, 0, 0): (32.23, 0.56), (0, 7, 3): (31.32, 2.12), (20, 0, 3): (33.70, 1.00),
          (20, 7, 0): (43.97, 2.83)},
    0.2: {(20, 7, 3): (53.81, 8.17), (10, 3.5, 1.5): (24.58, 3.76), (0, 0, 3): (11.29, 1.60),
          (0, 7, 0): (38.56, 5.00), (20, 0, 0): (34.43, 1.48), (0, 7, 3): (40.52, 6.08), (20, 0, 3): (36.67, 2.98),
          (20, 7, 0): (52.56, 7.10)},
    0.5: {(20, 7, 3): (117.86, 36.11), (10, 3.5, 1.5): (55.17, 17.40), (0, 0, 3): (27.37, 11.04),
          (0, 7, 0): (105.66, 33.36), (20, 0, 0): (47.73, 8.33), (0, 7, 3): (106.80, 35.08),
          (20, 0, 3): (54.57, 11.97), (20, 7, 0): (117.34, 34.83)},
}

# Other codes' P8 (far corner) read in their public repositories, for context (ms):
OTHER_CODES_P8 = [
    ("cardiacFoam (finite volume)", "solids4foam/cardiacFoam, tutorials/NiedererEtAl2012 cached results",
     {0.1: "45.4–45.6", 0.2: "54.5", 0.5: "142.8–142.9"}),
    ("Macchiato.jl (7-point finite differences)", "JuliaMeshless/Macchiato.jl, examples/niederer_benchmark",
     {0.1: "43.8"}),
    ("fenics-beat (P1 finite elements)", "finsberg/fenics-beat, demos/niederer_benchmark.py",
     {0.1: "37.9–40.6", 0.2: "38.2–39.9", 0.5: "55.8–56.7"}),
]


def compare(points: dict, positions: dict, dx: float) -> list[tuple]:
    """(our label, position, ours, mean, SD) for every published point at ``dx`` (mm); ``points``: our label ->
    activation time (ms), ``positions``: our label -> position (mm)."""
    table = ELEVEN_CODES_DT001.get(dx, {})
    out = []
    for label, pos in positions.items():
        key = tuple(float(v) for v in pos)
        for p, (mean, sd) in table.items():
            if tuple(float(v) for v in p) == key:
                out.append((label, pos, points[label], mean, sd))
    return out
