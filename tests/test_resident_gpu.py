"""The resident placement: the PDE and the cells on one GPU per rank. Run on a GPU node:

    python3 -m pytest -q -s -m gpu tests/test_resident_gpu.py

- resident equals the cpu placement (native C cells, host PETSc) within the solver tolerance: TT06 and Bondarenko,
  monodomain and bidomain, 2D and 3D, 1 rank and 2 ranks sharing one GPU (cell.share_gpu) — Vm, φe, probe traces
  and the activation map;
- zero host<->GPU copies inside the steps, from PETSc's own counters (the stage "cardiosim: steps"), with probes
  and snapshots configured;
- PCMG on GPU matrices: the elliptic iterations equal the CPU's (±1) with the same options, with and without
  the workaround of docs/dev/petsc-pcmg-gpu.md (the matrices are assembled on the host, which avoids the defect);
- a restart in resident is bit-identical to the uninterrupted run; a cpu checkpoint resumes as resident and a
  resident one as cpu, each agreeing with the uninterrupted run of the other placement within the tolerance.
"""

from __future__ import annotations

import json
import shutil

import h5py
import numpy as np
import pytest

from conftest import require_gpu, run_cli

pytestmark = pytest.mark.gpu

TIGHT = ["-parabolic_ksp_rtol", "1e-13", "-elliptic_ksp_rtol", "1e-13"]
SHEET = """
[simulation]
equations = "{equations}"
duration = {duration}
dt = 0.02
ode_substeps = {k}
progress_interval = 0
[grid]
size = {size}
spacing = {spacing}
[tissue]
fibre_angle = 30.0
[cell]
model = "{model}"
[[stimulus]]
shape = "box"
lower = {lower}
upper = {upper}
duration = 1.0
current_density = {amp}
[[probe]]
name = "middle"
position = {probe}
[output]
interval = 1.0
"""
GEOMETRY = {   # even cell counts, so that geometric multigrid has several levels
    "2D": dict(size=[0.4, 0.2], spacing=0.0125, lower=[0.0, 0.0], upper=[0.03, 0.2], probe=[0.2, 0.1]),
    "3D": dict(size=[0.16, 0.08, 0.04], spacing=0.01, lower=[0.0, 0.0, 0.0], upper=[0.03, 0.08, 0.04],
               probe=[0.08, 0.04, 0.02]),
}
MODELS = {"tt06": dict(k=10, amp=-52.0, duration=4.0), "bondarenko": dict(k=200, amp=-80.0, duration=3.0)}
CPU = ['cell.placement="cpu"', 'cell.backend="native"']
RESIDENT = ['cell.placement="resident"', 'cell.backend="cuda"']


@pytest.fixture(scope="module")
def n_gpus():
    return require_gpu()


def write_config(tmp_path, model="tt06", equations="bidomain", geometry="2D", **over) -> str:
    kw = {**MODELS[model], **GEOMETRY[geometry], "model": model, "equations": equations, **over}
    cfg = tmp_path / f"{model}-{equations}-{geometry}.toml"
    cfg.write_text(SHEET.format(**{k: json.dumps(v) if isinstance(v, list) else v for k, v in kw.items()}))
    return cfg


def run(tmp_path, cfg, tag, sets, np_=1, petsc=(), extra=(), env=None):
    out = tmp_path / f"{tag}.h5"
    args = ["run", cfg, "--output", out, "--overwrite", *extra]
    for s in sets:
        args += ["--set", s]
    proc = run_cli([*args, "--", *tight(cfg), *petsc], np=np_, check=True, env=env, timeout=900)
    return out, proc.stdout


def tight(cfg) -> list[str]:
    """TIGHT, less the elliptic options where there is no elliptic solver (an unused option is an error)."""
    return TIGHT if 'equations = "bidomain"' in cfg.read_text() else TIGHT[:2]


def contents(path) -> dict:
    with h5py.File(path) as f:
        d = {"Vm": f["fields/Vm"][:], "activation": f["maps/activation_time"][:]}
        if "fields/phi_e" in f:
            d["phi_e"] = f["fields/phi_e"][:]
        for name in f["probes"]:
            if name != "time":
                g = f["probes"][name]
                for field in g:
                    d[f"probe {name} {field}"] = g[field][:]
        d["layout"] = json.loads(f.attrs["layout"])
    return d


def summary(path) -> dict:
    return json.loads(path.with_suffix(".json").read_text())


CASES = [("tt06", "bidomain", "2D", 1), ("tt06", "monodomain", "3D", 1), ("tt06", "bidomain", "3D", 2),
         ("bondarenko", "bidomain", "2D", 1), ("bondarenko", "monodomain", "2D", 2),
         ("bondarenko", "bidomain", "3D", 2)]


@pytest.mark.parametrize("model, equations, geometry, np_", CASES)
def test_resident_equals_cpu(tmp_path, n_gpus, model, equations, geometry, np_):
    cfg = write_config(tmp_path, model, equations, geometry)
    share = ['cell.share_gpu=true'] if np_ > n_gpus else []
    cpu, _ = run(tmp_path, cfg, "cpu", CPU, np_)
    res, stdout = run(tmp_path, cfg, "resident", RESIDENT + share, np_)
    a, b = contents(cpu), contents(res)
    assert b["layout"]["placement"] == "resident" and b["layout"]["ode_backend"] == "cuda"
    assert a["Vm"][-1].max() > 0.0 or np.nanmax(a["activation"]) > 0.0   # the wave started
    print(f"\n{model} {equations} {geometry}, {np_} rank(s) on {n_gpus} GPU(s):")
    for key in a:
        if key == "layout":
            continue
        x, y = a[key], b[key]
        assert np.array_equal(np.isnan(x), np.isnan(y)), key
        d = float(np.nanmax(np.abs(x - y))) if np.isfinite(x).any() else 0.0
        print(f"  {key:<22} max |resident - cpu| = {d:.3g}")
        # FMA contraction and 1-ulp exp/log in the GPU kernel (tests/test_cuda_tissue.py: < 1e-6 mV), and two
        # solvers (GPU: CG+Jacobi, MG with a Chebyshev coarse solve; CPU: block Jacobi/ILU, MG with an SVD) each
        # converged to 1e-13 relative
        assert d < 1e-6, key


@pytest.mark.parametrize("equations", ["bidomain", "monodomain"])
def test_zero_host_copies_per_step(tmp_path, n_gpus, equations):
    cfg = write_config(tmp_path, "tt06", equations, "2D")
    log = tmp_path / "log.txt"
    res, _ = run(tmp_path, cfg, "resident", RESIDENT, petsc=["-log_view", f":{log}"])
    s = summary(res)
    copies = s["petsc_log"]
    print(f"\n{equations}: PETSc's counters over the steps: {copies}")
    assert copies["steps"] == s["steps"]
    assert copies["cpu_to_gpu_copies"] == 0 and copies["gpu_to_cpu_copies"] == 0
    e = s["energy"]                     # NVML's board energy; the H100's counter works
    print(f"energy: {e}")
    assert e["available"] and e["gpus"] == 1 and e["loop_j"] > 0 and e["setup_j"] >= 0
    text = log.read_text()
    # the stage and the phase events are in -log_view, and PETSc did count copies elsewhere (snapshots, set-up):
    # the counters work
    assert "cardiosim: steps" in text and "cardiosim:step" in text and "cardiosim:reaction" in text
    copy_events = [ln for ln in text.splitlines() if ln.split()[:1] and "Copy" in ln.split()[0]
                   and ln.split()[1].isdigit()]
    print("\n".join(copy_events))
    assert any(int(ln.split()[1]) > 0 for ln in copy_events)


@pytest.mark.parametrize("layout", ["root", "ranks"])
def test_zero_host_copies_on_two_gpus(tmp_path, n_gpus, layout):
    """Bidomain on 2 GPUs with the IPC transport: since the right-hand sides' products go through the stencil
    solvers' seam (cardiosim.tissue.equations.TissueModel._product), nothing is copied between host and device inside the
    steps, by PETSc's counters, with the solve on rank 0 (root) or split over the ranks."""
    if n_gpus < 2:
        pytest.skip("needs 2 GPUs")
    cfg = write_config(tmp_path, "tt06", "bidomain", "2D")
    layouts = [x for p in ("parabolic", "elliptic") for x in (f"-{p}_smg_layout", layout, f"-{p}_smg_transport", "ipc")]
    res, stdout = run(tmp_path, cfg, "resident", RESIDENT, 2, petsc=["-log_view", f":{tmp_path / 'log.txt'}", *layouts])
    s = summary(res)
    copies = s["petsc_log"]
    print(f"\n{layout}: PETSc's counters over the steps: {copies}")
    assert {"root": "whole on rank 0", "ranks": "split over 2 ranks"}[layout] in stdout
    assert copies["steps"] == s["steps"]
    assert copies["cpu_to_gpu_copies"] == 0 and copies["gpu_to_cpu_copies"] == 0


def pcmg_options(levels: int) -> list[str]:
    o = {"pc_type": "mg", "pc_mg_levels": str(levels), "pc_mg_galerkin": "both", "mg_levels_ksp_type": "chebyshev",
         "mg_levels_pc_type": "jacobi", "mg_coarse_ksp_type": "chebyshev", "mg_coarse_ksp_max_it": "8",
         "mg_coarse_ksp_norm_type": "none", "mg_coarse_ksp_chebyshev_esteig": "0,0.1,0,1.1",
         "mg_coarse_pc_type": "jacobi"}
    return [x for k, v in o.items() for x in (f"-elliptic_{k}", v)] + ["-parabolic_pc_type", "jacobi"]


def test_pcmg_gpu_iterations_equal_cpu(tmp_path, n_gpus):
    """129 x 65 nodes, 6 levels: the resident elliptic solve takes the CPU's iterations (±1) with the same
    options, with the workaround (cardiosim.solvers.linear.sync_host) and without it: the stiffness matrices are
    assembled on the host (CSR), which alone keeps PCMG's Galerkin hierarchy right. The PETSc defect itself, with
    a COO-assembled matrix, is docs/dev/petsc-pcmg-gpu.md's reproducer."""
    cfg = write_config(tmp_path, "tt06", "bidomain", "2D", size=[1.28, 0.64], spacing=0.01, duration=1.0,
                       upper=[0.03, 0.64], probe=[0.5, 0.3])
    opts = pcmg_options(6)
    cpu, _ = run(tmp_path, cfg, "cpu", CPU, petsc=opts)
    res, _ = run(tmp_path, cfg, "resident", RESIDENT, petsc=opts)
    raw, _ = run(tmp_path, cfg, "raw", RESIDENT, petsc=opts, env={"CARDIOSIM_PCMG_GPU_WORKAROUND": "0"})
    its = {k: summary(p)["iterations"]["elliptic"] for k, p in (("cpu", cpu), ("resident", res), ("raw", raw))}
    print(f"\nelliptic iterations per step (mean, max): " +
          ", ".join(f"{k} {v['mean']:.2f}, {v['max']}" for k, v in its.items()))
    assert abs(its["resident"]["mean"] - its["cpu"]["mean"]) <= 1.0
    assert abs(its["resident"]["max"] - its["cpu"]["max"]) <= 1
    assert abs(its["raw"]["mean"] - its["cpu"]["mean"]) <= 1.0


@pytest.fixture(scope="module")
def restarts(tmp_path_factory, n_gpus):
    """Uninterrupted runs in both placements (4 ms, checkpoint at 2 ms); each checkpoint resumed in the same and in
    the other placement."""
    d = tmp_path_factory.mktemp("resident-restart")
    cfg = write_config(d, "tt06", "bidomain", "2D")
    ck = ["checkpoint.interval=2.0"]
    out = {}
    for name, sets in (("cpu", CPU), ("resident", RESIDENT)):
        path, _ = run(d, cfg, name, sets + ck)
        out[name] = path
        for other, osets in (("cpu", CPU), ("resident", RESIDENT)):
            part = d / f"{name}-then-{other}.h5"
            shutil.copy(path, part)
            shutil.copy(d / f"{name}.ckpt.h5", d / f"{name}-then-{other}.ckpt.h5")
            args = ["run", cfg, "--output", part, "--quiet", "--restart", d / f"{name}-then-{other}.ckpt.h5"]
            for s in osets:
                args += ["--set", s]
            run_cli([*args, "--", *tight(cfg)], check=True, timeout=900)
            out[f"{name}-then-{other}"] = part
    return out


def test_resident_restart_is_bit_identical(restarts):
    a, b = contents(restarts["resident"]), contents(restarts["resident-then-resident"])
    for key in a:
        if key != "layout":
            assert np.array_equal(a[key], b[key], equal_nan=True), key


@pytest.mark.parametrize("first, then", [("cpu", "resident"), ("resident", "cpu")])
def test_restart_across_placements(restarts, first, then):
    a, b = contents(restarts[then]), contents(restarts[f"{first}-then-{then}"])
    with h5py.File(restarts[f"{first}-then-{then}"]) as f:
        assert json.loads(f.attrs["restarts"])[-1]["layout"]["placement"] == then   # the restart's own layout
    print(f"\n{first} checkpoint at 2 ms resumed as {then}, against {then} throughout:")
    for key in a:
        if key == "layout":
            continue
        d = float(np.nanmax(np.abs(a[key] - b[key])))
        print(f"  {key:<22} max difference {d:.3g}")
        assert d < 1e-6, key
