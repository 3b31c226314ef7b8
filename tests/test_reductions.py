"""Equal anisotropy ratio (reference/verification.md §2): σe = λσi makes the bidomain a monodomain with
σm = λσi/(1+λ), and φe = −Vm/(1+λ) + const. Checked over a propagating wave."""

from pathlib import Path

import h5py
import numpy as np

from cardiosim.analysis.maps import activation_time

from conftest import run_cli

CONFIG = Path(__file__).parent / "configs" / "sheet.toml"
LAMBDA = 6.34578 / 1.74


def test_bidomain_equals_monodomain_under_equal_anisotropy(tmp_path):
    out = {}
    for eq in ("bidomain", "monodomain"):
        out[eq] = tmp_path / f"{eq}.h5"
        run_cli(["run", CONFIG, "--quiet", "--set", f'simulation.equations="{eq}"', "--output", out[eq]],
                check=True)
    with h5py.File(out["bidomain"]) as b, h5py.File(out["monodomain"]) as m:
        t = b["probes/time"][:]
        print(f"\n{'probe':<8}{'max |Vb - Vm| (mV)':>20}{'activation bi (ms)':>20}{'mono (ms)':>12}")
        for name in ("near", "middle", "far"):
            vb, vm = b["probes"][name]["Vm"][:], m["probes"][name]["Vm"][:]
            diff = np.abs(vb - vm).max()
            tb, tm = activation_time(t, vb, -40.0), activation_time(t, vm, -40.0)
            print(f"{name:<8}{diff:20.4f}{tb:20.3f}{tm:12.3f}")
            assert vb.max() > 0.0, f"probe {name}: the wave did not arrive"
            assert diff < 0.5
        # φe + Vm/(1+λ) is spatially constant in every snapshot.
        spread = max(np.ptp(phi + v / (1 + LAMBDA))
                     for phi, v in zip(b["fields/phi_e"][:], b["fields/Vm"][:]))
        print(f"max spatial spread of φe + Vm/(1+λ): {spread:.3e} mV")
        assert spread < 0.5
