"""The command line, unchanged: every verb's ``--help``, its bare form and a few one-line mistakes per verb, run as
``python -m cardiosim ...`` in a fresh folder, give exactly the stdout, stderr and exit status recorded in
tests/data/cli/snapshot.json.

Only three things are normalised: the folder the command runs in ({tmp}), the source tree ({repo}) and the Python
executable ({python}). Help texts are wrapped at 80 columns (COLUMNS=80) and depend on the Python version's argparse
(the snapshot is from Python 3.11).

A deliberate change of the command line is recorded again with ``python tests/test_cli_snapshot.py --record``
(``--record TREE`` runs another source tree's cardiosim) and reviewed in the diff of snapshot.json.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SNAPSHOT = Path(__file__).resolve().parent / "data" / "cli" / "snapshot.json"

SHEET = "{repo}/tests/configs/sheet.toml"
RESULT = "{repo}/tests/data/legacy/v0.1-2026-11/sheet.h5"         # a small 2D result file, checked in
FIG = "{tmp}/fig"                                                   # plot: never beside RESULT

# Files made in the command's folder before it runs: text, or a function of the source tree giving it.
FILES = {
    "bad-syntax.toml": "[grid\nspacing = \n",
    # the sheet with two mistakes: an unknown key and a negative time step
    "bad-key.toml": lambda root: "frobnicate = 2\n" + (root / "tests/configs/sheet.toml").read_text().replace(
        "dt = 0.02", "dt = -0.02"),
    "text.h5": "not an HDF5 file\n",
}

BENCHMARKS = ("kernels", "niederer", "pde", "table41", "cellml", "microscopic", "mask", "scaling", "halo",
              "cell-steps", "pacing")

# (name, argv); quick commands only (no run, no compilation), each writing nothing outside its folder.
CASES = [
    # cardiosim itself
    ("bare", []),
    ("help", ["--help"]),
    ("version", ["--version"]),
    ("unknown-verb", ["frobnicate"]),
    ("unknown-option", ["--frobnicate"]),
    # run
    ("run-help", ["run", "--help"]),
    ("run-bare", ["run"]),
    ("run-missing-config", ["run", "{tmp}/missing.toml"]),
    ("run-bad-syntax", ["run", "{tmp}/bad-syntax.toml"]),
    ("run-bad-key", ["run", "{tmp}/bad-key.toml"]),
    ("run-set-unknown-key", ["run", SHEET, "--set", "nosuch.key=1"]),
    ("run-set-unknown-key-in-section", ["run", SHEET, "--set", "simulation.frobnicate=1"]),
    ("run-set-bad-value", ["run", SHEET, "--set", "simulation.dt=abc"]),
    ("run-set-no-equals", ["run", SHEET, "--set", "simulation.dt"]),
    ("run-set-negative-dt", ["run", SHEET, "--set", "simulation.dt=-1.0"]),
    ("run-unknown-option", ["run", SHEET, "--frobnicate"]),
    ("run-restart-missing", ["run", SHEET, "--restart", "{tmp}/missing.ckpt.h5", "--output", "{tmp}/out.h5"]),
    ("run-output-not-ours", ["run", SHEET, "--output", "{tmp}/text.h5"]),
    # config
    ("config-help", ["config", "--help"]),
    ("config-bare", ["config"]),
    ("config-doc", ["config", "--doc"]),
    ("config-check", ["config", "check", SHEET]),
    ("config-check-bare", ["config", "check"]),
    ("config-check-missing", ["config", "check", "{tmp}/missing.toml"]),
    ("config-check-bad-syntax", ["config", "check", "{tmp}/bad-syntax.toml"]),
    ("config-check-bad-key", ["config", "check", "{tmp}/bad-key.toml"]),
    ("config-unknown-action", ["config", "frobnicate"]),
    ("config-petsc-options", ["config", "--doc", "--", "-ksp_type", "cg"]),
    # cell (bare runs a paced cell: not here)
    ("cell-help", ["cell", "--help"]),
    ("cell-param-no-value", ["cell", "--param", "GKr"]),
    ("cell-param-infinite", ["cell", "--param", "GKr=inf"]),
    ("cell-scale-negative", ["cell", "--scale", "GKr=-1"]),
    ("cell-block-no-concentration", ["cell", "--block", "GKr=1"]),
    ("cell-block-bad-ic50", ["cell", "--block", "GKr=x", "--concentration", "1"]),
    ("cell-prepace-negative", ["cell", "--prepace", "-1"]),
    ("cell-bad-integrator", ["cell", "--integrator", "rk4"]),
    ("cell-bad-beats", ["cell", "--beats", "two"]),
    ("cell-unknown-model", ["cell", "--model", "nosuch"]),
    ("cell-missing-cellml", ["cell", "--model", "{tmp}/missing.cellml"]),
    ("cell-backend-one-cell", ["cell", "--backend", "cuda"]),
    ("cell-bad-restitution", ["cell", "--restitution", "a,b"]),
    ("cell-population-no-sample", ["cell", "--population", "2"]),
    ("cell-output-not-ours", ["cell", "--output", "{tmp}/text.h5"]),
    # model
    ("model-help", ["model", "--help"]),
    ("model-bare", ["model"]),
    ("model-info-bare", ["model", "info"]),
    ("model-info", ["model", "info", "bondarenko"]),
    ("model-info-unknown", ["model", "info", "nosuch"]),
    ("model-info-missing-cellml", ["model", "info", "{tmp}/missing.cellml"]),
    ("model-unknown-action", ["model", "show", "bondarenko"]),
    ("model-petsc-options", ["model", "info", "bondarenko", "--", "-ksp_type", "cg"]),
    # kernels (bare compiles with nvcc: not here)
    ("kernels-help", ["kernels", "--help"]),
    ("kernels-unknown-model", ["kernels", "--model", "nosuch"]),
    ("kernels-unknown-variant", ["kernels", "--variant", "nosuch"]),
    ("kernels-source-unknown", ["kernels", "--source", "nosuch"]),
    ("kernels-json-not-ours", ["kernels", "--source", "fused", "--json", "{tmp}/text.h5"]),
    # inspect
    ("inspect-help", ["inspect", "--help"]),
    ("inspect-bare", ["inspect"]),
    ("inspect-missing", ["inspect", "{tmp}/missing.h5"]),
    ("inspect-directory", ["inspect", "{tmp}"]),
    ("inspect-not-hdf5", ["inspect", "{tmp}/text.h5"]),
    ("inspect", ["inspect", RESULT]),
    ("inspect-config", ["inspect", RESULT, "--config"]),
    ("inspect-petsc-options", ["inspect", RESULT, "--", "-ksp_type", "cg"]),
    # plot
    ("plot-help", ["plot", "--help"]),
    ("plot-bare", ["plot"]),
    ("plot-missing", ["plot", "{tmp}/missing.h5", "--out", FIG]),
    ("plot-not-hdf5", ["plot", "{tmp}/text.h5", "--out", FIG]),
    ("plot-dpi", ["plot", RESULT, "--dpi", "5", "--out", FIG]),
    ("plot-isochrones", ["plot", RESULT, "--isochrones", "0", "--out", FIG]),
    ("plot-range", ["plot", RESULT, "--range", "1", "0", "--out", FIG]),
    ("plot-format", ["plot", RESULT, "--format", "gif", "--out", FIG]),
    ("plot-view-choice", ["plot", RESULT, "--view", "w", "--out", FIG]),
    ("plot-view-2d", ["plot", RESULT, "--view", "z", "--out", FIG]),
    ("plot-field", ["plot", RESULT, "--field", "nope", "--out", FIG]),
    ("plot-times", ["plot", RESULT, "--times", "1e9", "--out", FIG]),
    ("plot-out-a-file", ["plot", RESULT, "--out", "{tmp}/text.h5"]),
    # geometry, geometry fibres
    ("geometry-help", ["geometry", "--help"]),
    ("geometry-fibres-help", ["geometry", "fibres", "--help"]),
    ("geometry-bare", ["geometry"]),
    ("geometry-no-out", ["geometry", "lv"]),
    ("geometry-no-spacing", ["geometry", "lv", "--out", "{tmp}/geo.h5"]),
    ("geometry-bad-spacing", ["geometry", "lv", "--spacing", "-1", "--out", "{tmp}/geo.h5"]),
    ("geometry-two-sources", ["geometry", "lv", "extra.h5", "--spacing", "0.1", "--out", "{tmp}/geo.h5"]),
    ("geometry-bad-units", ["geometry", "lv", "--units", "km", "--out", "{tmp}/geo.h5"]),
    ("geometry-missing-mesh", ["geometry", "{tmp}/missing.vtu", "--spacing", "0.1", "--out", "{tmp}/geo.h5"]),
    ("geometry-out-not-ours", ["geometry", "lv", "--spacing", "0.1", "--out", "{tmp}/text.h5"]),
    ("geometry-fibres-bare", ["geometry", "fibres", "--out", "{tmp}/fib.h5"]),
    ("geometry-fibres-missing", ["geometry", "fibres", "{tmp}/missing.h5", "--out", "{tmp}/fib.h5"]),
    ("geometry-fibres-not-hdf5", ["geometry", "fibres", "{tmp}/text.h5", "--out", "{tmp}/fib.h5"]),
    # bench, bench NAME
    ("bench-bare", ["bench"]),
    ("bench-help", ["bench", "--help"]),
    ("bench-unknown", ["bench", "nosuch"]),
    *[(f"bench-{name}-help", ["bench", name, "--help"]) for name in BENCHMARKS],
    ("bench-niederer-unknown-option", ["bench", "niederer", "--frobnicate"]),
    ("bench-pacing-unknown-option", ["bench", "pacing", "--frobnicate"]),
    # info (bare reports this machine: not here)
    ("info-help", ["info", "--help"]),
    ("info-unknown-option", ["info", "--frobnicate"]),
    ("info-petsc-options", ["info", "--", "-ksp_type", "cg"]),
    # sweep
    ("sweep-help", ["sweep", "--help"]),
    ("sweep-bare", ["sweep"]),
    ("sweep-no-out", ["sweep", SHEET]),
    ("sweep-vary-no-values", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "simulation.dt"]),
    ("sweep-vary-unknown-key", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "nosuch.key=1,2"]),
    ("sweep-collect-unknown", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "simulation.dt=0.01",
                               "--collect", "nosuch"]),
    ("sweep-jobs-zero", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "simulation.dt=0.01", "--jobs", "0"]),
    ("sweep-bad-table", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "simulation.dt=0.01", "--table",
                         "{tmp}/t.txt"]),
    ("sweep-slurm", ["sweep", SHEET, "--out", "{tmp}/s", "--vary", "simulation.duration=1,2", "--slurm"]),
]


def run_case(argv, root: Path, folder: Path) -> dict:
    """``python -m cardiosim ARGV`` from the tree ``root``, in ``folder``; stdout, stderr (as lists of lines) and
    the exit status, with the folder, the tree and the interpreter named by placeholders."""
    for name, text in FILES.items():
        (folder / name).write_text(text(root) if callable(text) else text)
    args = [a.replace("{tmp}", str(folder)).replace("{repo}", str(root)) for a in argv]
    env = {k: v for k, v in os.environ.items() if k not in ("PETSC_OPTIONS", "PYTHONPATH", "COLUMNS", "LINES")}
    env.update(PYTHONPATH=str(root), PYTHONUNBUFFERED="1", COLUMNS="80", NO_COLOR="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    proc = subprocess.run([sys.executable, "-m", "cardiosim", *args], cwd=folder, capture_output=True, text=True,
                          timeout=120, env=env)

    def normal(text: str) -> list[str]:
        for mark, path in (("{tmp}", str(folder)), ("{python}", sys.executable), ("{repo}", str(root))):
            text = text.replace(path, mark)
        return text.split("\n")

    return {"argv": list(argv), "status": proc.returncode, "stdout": normal(proc.stdout),
            "stderr": normal(proc.stderr)}


def _snapshot() -> dict:
    return json.loads(SNAPSHOT.read_text())


def test_every_case_is_recorded():
    assert list(_snapshot()) == [name for name, _ in CASES]


@pytest.mark.parametrize("name,argv", CASES, ids=[name for name, _ in CASES])
def test_cli_output_unchanged(name, argv, tmp_path):
    want = _snapshot()[name]
    assert want["argv"] == argv
    got = run_case(argv, ROOT, tmp_path)
    assert got["status"] == want["status"], "\n".join(got["stderr"])
    assert "\n".join(got["stderr"]) == "\n".join(want["stderr"])
    assert "\n".join(got["stdout"]) == "\n".join(want["stdout"])


def record(root: Path) -> None:
    out = {}
    for name, argv in CASES:
        with tempfile.TemporaryDirectory() as folder:
            out[name] = run_case(argv, root, Path(folder).resolve())
        print(f"{name}: exit status {out[name]['status']}", flush=True)
    SNAPSHOT.parent.mkdir(parents=True, exist_ok=True)
    SNAPSHOT.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] != ["--record"]:
        sys.exit("usage: python tests/test_cli_snapshot.py --record [TREE]")
    record(Path(sys.argv[2]).resolve() if len(sys.argv) > 2 else ROOT)
