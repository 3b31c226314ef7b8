"""Generated CellML models (cardiosim/cells/cellml.py) in the CUDA fused kernel. Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_cellml_gpu.py

- three generated models (TT06, O'Hara–Rudy 2011 endo, Courtemanche 1998), Rush–Larsen over a whole beat, GRL1 over
  its first 200 ms and Forward Euler over the upstroke, equal their NumPy twin to 1e-10 relative (fmad off);
- their cell-steps/s beside the hand-written TT06 and Bondarenko kernels (printed as a markdown table for
  docs/performance.md);
- a generated model in tissue with every GPU placement (grouped, per-rank, resident) equals the cpu placement with
  the native C kernel.
"""

from __future__ import annotations

import json
import time

import h5py
import numpy as np
import pytest

from conftest import ROOT, require_gpu, run_cli

pytest.importorskip("myokit")
pytestmark = pytest.mark.gpu

from cardiosim import cells  # noqa: E402
from cardiosim.cells.stimulus import Protocol  # noqa: E402

MODELS = ROOT / "models"
GENERATED = {"tt06-generated": MODELS / "ten_tusscher_model_2006_epi.cellml",
             "ord2011-generated": MODELS / "ohara_rudy_2011_endo.cellml",
             "courtemanche-generated": MODELS / "courtemanche_ramirez_nattel_1998.cellml"}
AMPS = (-60.0, -30.0, 0.0, -80.0)          # µA/µF: well above, near and without threshold


@pytest.fixture(scope="module")
def gpu():
    require_gpu()
    import pycuda.driver as cuda
    print(f"\nGPU: {cuda.Device(0).name()}")
    return cuda


def _gpu_vs_numpy(model, integrator, dt, t_end):
    """Largest difference over every state and every ms, relative to each state's largest magnitude."""
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    n = len(AMPS)
    proto = [Protocol(start=0.0, duration=1.0, period=0.0, count=1)]
    amps = np.array([AMPS])
    y = model.initial_state(n)
    step = {"rush-larsen": model.rush_larsen, "grl1": model.grl1}.get(integrator, model.forward_euler)
    work = np.empty_like(y)
    k = int(round(1.0 / dt))
    worst, scale = 0.0, np.abs(y).max(axis=1)
    with CudaBackend(model, y, fmad=False, integrator=integrator) as be:
        stim = be.stimulus(proto, amps)
        for i in range(int(round(t_end))):
            for j in range(k):
                t = i * k * dt + j * dt          # the kernel's substep time, rounded the same way
                step(y, t, dt, amps[0] * (1.0 if proto[0].active(t) else 0.0), work)
            be.advance(i * k * dt, dt, k, stim)
            g = be.from_device()
            scale = np.maximum(scale, np.abs(y).max(axis=1))
            worst = max(worst, float(np.max(np.abs(g - y) / scale[:, None])))
    return worst, float(y[0].max())


@pytest.mark.parametrize("name", list(GENERATED))
def test_generated_kernel_equals_numpy_twin(gpu, name):
    model = cells.model_class(str(GENERATED[name]))()
    # The same arithmetic on both sides, so the step need only be stable; the NumPy twin's steps are the test's
    # time (O'Hara-Rudy: ~2 ms each), hence tissue's 0.02 ms and the upstroke and plateau for GRL1.
    rl, v_rl = _gpu_vs_numpy(model, "rush-larsen", 0.02, 400.0)      # a whole beat
    fe, v_fe = _gpu_vs_numpy(model, "forward-euler", 0.001, 10.0)    # the upstroke, at a stable FE step
    grl, v_grl = _gpu_vs_numpy(model, "grl1", 0.02, 200.0)
    print(f"\n{name}: GPU fused kernel vs NumPy, max relative difference: Rush-Larsen (0.02 ms, 400 ms) {rl:.2e}, "
          f"Forward Euler (1 µs, 10 ms) {fe:.2e}, GRL1 (0.02 ms, 200 ms) {grl:.2e}")
    assert rl < 1e-10 and fe < 1e-10 and grl < 1e-10


def test_cell_steps_per_second(gpu, tmp_path):
    """Throughput of the fused Forward-Euler kernel, 2^20 cells at rest, 100 substeps per launch (fmad on, as in
    production); printed for docs/performance.md."""
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    n, k, launches = 1 << 20, 100, 10
    rows = []
    models = {"tt06 (hand)": cells.make("tt06"), "bondarenko (hand)": cells.make("bondarenko")}
    models.update({name: cells.model_class(str(p))() for name, p in GENERATED.items()})
    models["bondarenko-generated"] = cells.model_class(str(MODELS / "bondarenko_szigeti_bett_kim_rasmusson_2004_"
                                                                       "apical.cellml"))()
    # the same TT06 without the per-run specialisation (every constant read from constant memory)
    general = cells.model_class(str(GENERATED["tt06-generated"]))()
    general.kernel_header_dir = type(general).kernel_header_dir
    models["tt06-generated, constants not folded"] = general
    # the equations as Myokit has them: constants folded, no common subexpressions or reciprocals (cse.py)
    from cardiosim.cells import cellml
    for key in ("tt06-generated", "ord2011-generated"):
        m = cells.model_class(str(GENERATED[key]))()
        folder = tmp_path / key
        folder.mkdir()
        (folder / f"{m.kernel_name}.h").write_text(cellml.fold_constants(m, cellml.generate(GENERATED[key],
                                                                                              cse=False)["c_header"]))
        m.kernel_header_dir = folder
        models[f"{key}, without common subexpressions"] = m
    for name, model in models.items():
        dt = 1e-4 if "bondarenko" in name else 1e-3
        with CudaBackend(model, model.initial_state(n)) as be:
            be.advance(0.0, dt, k)                      # warm-up (and the module load)
            be.synchronize()
            t0 = time.perf_counter()
            for i in range(launches):
                be.advance((i + 1) * k * dt, dt, k, check=False)
            be.synchronize()
            wall = time.perf_counter() - t0
            be.check(0.0, dt)
            regs = be.registers()["num_regs"]
        rows.append((name, model.n_states, regs, n * k * launches / wall))
    hand = {"tt06": rows[0][3], "bondarenko": rows[1][3]}
    print("\n| model | states | registers | cell-steps/s (fused FE, 2^20 cells, k = 100) | × hand twin |\n"
          "|---|---|---|---|---|")
    for name, ns, regs, rate in rows:
        twin = next((h for key, h in hand.items() if name.startswith(key) and "hand" not in name), None)
        print(f"| {name} | {ns} | {regs} | {rate:.3e} | {f'{rate / twin:.2f}' if twin else ''} |")
    assert all(r[3] > 0 for r in rows)


SHEET = """
[simulation]
equations = "monodomain"
duration = 4.0
dt = 0.02
ode_substeps = 2
progress_interval = 0
[grid]
size = [0.4, 0.2]
spacing = 0.0125
[cell]
model = "{model}"
integrator = "rush-larsen"
[[stimulus]]
shape = "box"
lower = [0.0, 0.0]
upper = [0.03, 0.2]
duration = 1.0
current_density = -80.0
[output]
interval = 1.0
"""
TIGHT = ["-parabolic_ksp_rtol", "1e-13"]


@pytest.mark.parametrize("placement", ["grouped", "per-rank", "resident"])
def test_generated_model_in_every_gpu_placement(gpu, tmp_path, placement):
    cfg = tmp_path / "sheet.toml"
    cfg.write_text(SHEET.format(model=GENERATED["ord2011-generated"]))

    def run(tag, sets):
        out = tmp_path / f"{tag}.h5"
        args = ["run", cfg, "--output", out, "--quiet"]
        for s in sets:
            args += ["--set", s]
        run_cli([*args, "--", *TIGHT], check=True, timeout=900)
        with h5py.File(out) as f:
            return f["fields/Vm"][:], json.loads(f.attrs["layout"])

    a, _ = run("cpu", ['cell.placement="cpu"', 'cell.backend="native"'])
    b, layout = run(placement, [f'cell.placement="{placement}"', 'cell.backend="cuda"'])
    assert layout["placement"] == placement and layout["ode_backend"] == "cuda"
    assert a[-1].max() > 0.0                               # the wave is under way
    d = float(np.abs(a - b).max())
    print(f"\nO'Hara-Rudy 2011 (generated), {placement}: max |cuda - native| Vm = {d:.3g} mV")
    assert d < 1e-6                           # FMA and 1-ulp exp in the kernel, as in tests/test_cuda_tissue.py
