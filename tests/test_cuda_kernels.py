"""The CUDA Forward-Euler kernels (kernels/fused.cu and the seed's variants, cardiosim/reaction/ode/cuda_backend.py) against
the NumPy reference and the native CPU driver.

Skipped where PyCUDA or a GPU is missing. Run on a GPU node with
    python3 -m pytest -q -s -m gpu tests/test_cuda_kernels.py
CARDIOSIM_GPU_TEST_MS (default 50) sets the simulated time of the comparison with the CPU driver;
CARDIOSIM_GPU_CPU_CELLS (default 400) the number of cells also run on the CPU; CARDIOSIM_GPU_VARIANT_MS (default 50:
the upstroke, plateau and repolarisation of every group; 1000 for the whole beat) the simulated time of the seed's
variants against the NumPy reference (the fused kernel always runs the beat). With one launch per substep a variant's
whole beat takes ~500 s on an H100: five of them would add some 40 minutes to `make test-gpu`, and the variants
are bit-identical to the fused kernel at every compared time.
"""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

from pathlib import Path

from cardiosim.cells import make
from conftest import require_gpu
from cardiosim.reaction.ode.kernel_variants import VARIANTS
from cardiosim.reaction.ode.native import NativeModel
from cardiosim.cells.stimulus import Protocol

pytestmark = pytest.mark.gpu

DT = 1e-4                      # ms; Forward Euler on Bondarenko needs it (1e-3 blows up, tests/test_bondarenko.py)
STARTS = (1.0, 2.0, 3.0, 4.0)  # ms: staggered stimulus onsets; group 4 (c % 5 == 4) is never stimulated
N_GROUPS = len(STARTS) + 1


@pytest.fixture(scope="module")
def gpu():
    require_gpu()
    import pycuda.driver as cuda
    print(f"\nGPU: {cuda.Device(0).name()}, CUDA driver {cuda.get_driver_version()}")
    return cuda


def _stimulus(n_cells):
    protocols = [Protocol(s, 0.5, 0.0, 1) for s in STARTS]
    amps = np.zeros((len(STARTS), n_cells))
    c = np.arange(n_cells)
    for p in range(len(STARTS)):
        amps[p, c % N_GROUPS == p] = -80.0
    return protocols, amps


def _snap_launches(t_end, k):
    """Launch indices after which the state is compared: mid-upstroke/plateau (5 ms), repolarising (10 ms), end."""
    return {int(round(t / (k * DT))) - 1: t for t in (5.0, 10.0, t_end) if t <= t_end}


def _run_gpu(model, y0, protocols, amps, t_end, k, fmad, variant="fused", when=None):
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    snaps = {}
    when = when or _snap_launches(t_end, k)
    with CudaBackend(model, y0, fmad=fmad, variant=variant) as be:
        stim = be.stimulus(protocols, amps)
        n_launch = int(round(t_end / (k * DT)))
        be.synchronize()
        t0 = time.perf_counter()
        for i in range(n_launch):
            be.advance(i * k * DT, DT, k, stim, check=(i % 50 == 49 or i == n_launch - 1))
            if i in when:
                snaps[when[i]] = be.from_device()
        be.synchronize()
        wall = time.perf_counter() - t0        # includes the few snapshot downloads
        return snaps, wall, be.registers()


def test_fused_kernel_matches_cpu_driver(gpu):
    """10^5 apical cells, staggered stimuli, integrated on the GPU; a subset also on the CPU: all 41 states agree."""
    t_end = float(os.environ.get("CARDIOSIM_GPU_TEST_MS", "50"))
    n_cpu = int(os.environ.get("CARDIOSIM_GPU_CPU_CELLS", "400"))
    n, k = 100_000, 100
    model = make("bondarenko", "apical")
    y0 = model.initial_state(n)
    protocols, amps = _stimulus(n)

    # CPU reference on a subset spread over the array, every stimulus group represented
    m = np.arange(n_cpu)
    sub = N_GROUPS * (m * ((n // N_GROUPS - 1) // max(n_cpu - 1, 1))) + m % N_GROUPS
    assert sub.max() < n
    nm = NativeModel(model)
    y_cpu = np.ascontiguousarray(y0[:, sub])
    stim_cpu = nm.stimulus(protocols, amps[:, sub], len(sub))
    when = _snap_launches(t_end, k)
    cpu_snaps = {}
    vmax = np.full(len(sub), -np.inf)
    t0 = time.perf_counter()
    for i in range(int(round(t_end / (k * DT)))):
        nm.advance(y_cpu, i * k * DT, DT, k, stim_cpu)
        np.maximum(vmax, y_cpu[0], out=vmax)
        if i in when:
            cpu_snaps[when[i]] = y_cpu.copy()
    cpu_wall = time.perf_counter() - t0
    print(f"CPU driver: {len(sub)} cells x {t_end:g} ms at dt = {DT:g} ms: {cpu_wall:.1f} s, "
          f"{len(sub) * t_end / DT / cpu_wall:.3g} cell-steps/s")
    for g in range(N_GROUPS):
        sel = m % N_GROUPS == g
        print(f"  group {g} (start {STARTS[g] if g < len(STARTS) else 'none'}): V_max {vmax[sel].max():.3f} mV; V at "
              + ", ".join(f"{t:g} ms {y[0, sel][0]:.4f}" for t, y in cpu_snaps.items()) + " mV")
    stimulated = m % N_GROUPS < len(STARTS)
    assert (vmax[stimulated] > 0.0).all() and (vmax[~stimulated] < -60.0).all(), "expected APs in groups 0-3 only"

    names = model.state_names
    worst = {}
    for fmad in (True, False):
        snaps, wall, regs = _run_gpu(model, y0, protocols, amps, t_end, k, fmad)
        print(f"GPU fmad={fmad}: {n} cells x {t_end:g} ms, k = {k}: {wall:.2f} s, "
              f"{n * t_end / DT / wall:.3g} cell-steps/s; {regs}")
        rel_all = np.zeros(model.n_states)
        for t, y_gpu in snaps.items():
            y_c = cpu_snaps[t]
            assert np.isfinite(y_gpu).all()
            # cells of one group are identical: the GPU must agree with itself across the array
            for g in range(N_GROUPS):
                grp = y_gpu[:, g::N_GROUPS]
                assert (grp == grp[:, :1]).all(), f"group {g}: cells with the same inputs differ on the GPU"
            d = y_gpu[:, sub] - y_c
            scale = np.abs(y_c).max(axis=1)
            rel = np.abs(d).max(axis=1) / np.where(scale > 0, scale, 1.0)
            rel_all = np.maximum(rel_all, rel)
            order = np.argsort(rel)[::-1]
            print(f"  t = {t:g} ms, max |GPU - CPU| / max|CPU| per state (fmad={fmad}), largest first:")
            for r0 in range(0, model.n_states, 11):
                print("   " + ", ".join(f"{names[s]} {rel[s]:.1e}" for s in order[r0:r0 + 11]))
            print(f"   max {rel.max():.3e} ({names[order[0]]}); bitwise equal states: {int((rel == 0).sum())}/41")
        worst[fmad] = rel_all
    print("FMA: with fmad=true nvcc fuses a*b+c into one rounding (the CPU build, x86-64 without -mfma, rounds "
          "twice); with fmad=false the remaining differences come from CUDA's exp/log (<= 1-2 ulp) against glibc's.")
    for fmad, rel in worst.items():
        assert rel.max() < 1e-10, f"fmad={fmad}: {names[int(np.argmax(rel))]} differs by {rel.max():.3e} relative"


NUMPY_BEAT = Path(__file__).parent / "data" / "bondarenko_apical_beat1.npz"   # tests/data/make_bondarenko_beat1.py


_FUSED_SNAPS: dict = {}   # the fused kernel's states, for the bitwise comparison of the seed's variants


@pytest.mark.parametrize("variant", ["fused"] + [v for v in VARIANTS if v != "fused"])
def test_variant_matches_numpy_reference(gpu, variant):
    """10^5 apical cells, staggered stimuli, one beat (1000 ms at dt 1e-4 ms, k = 100) on the GPU with each kernel
    variant: all 41 states equal the NumPy reference (one cell per stimulus group, computed once by
    tests/data/make_bondarenko_beat1.py) to 1e-10 relative, at 5, 10, 50 and 1000 ms."""
    ref = np.load(NUMPY_BEAT)
    assert tuple(ref["starts"]) == STARTS and float(ref["dt"]) == DT
    k = int(ref["k"])
    t_end = 1000.0 if variant == "fused" else float(os.environ.get("CARDIOSIM_GPU_VARIANT_MS", "50"))
    times = [float(t) for t in ref["times"] if t <= t_end]
    when = {int(round(t / (k * DT))) - 1: t for t in times}
    n = 100_000
    model = make("bondarenko", "apical")
    protocols, amps = _stimulus(n)
    snaps, wall, regs = _run_gpu(model, model.initial_state(n), protocols, amps, max(times), k, True, variant, when)
    print(f"\n{variant}: {n} cells x {max(times):g} ms, k = {k}: {wall:.1f} s, "
          f"{n * max(times) / DT / wall:.3g} cell-steps/s, {regs['num_regs']} registers")
    names = model.state_names
    for i, t in enumerate(times):
        y_ref = ref["states"][list(ref["times"]).index(t)]          # (41, 5): one cell per group
        y = snaps[t]
        worst = 0.0
        for g in range(N_GROUPS):
            grp = y[:, g::N_GROUPS]
            assert (grp == grp[:, :1]).all(), f"group {g}: cells with the same inputs differ on the GPU"
        d = np.abs(y[:, :N_GROUPS] - y_ref)                          # cells 0..4 are groups 0..4
        scale = np.abs(y_ref).max(axis=1)
        rel = d.max(axis=1) / np.where(scale > 0, scale, 1.0)
        worst = rel.max()
        print(f"  t = {t:g} ms: max relative |GPU - NumPy| {worst:.2e} ({names[int(np.argmax(rel))]}); V = "
              + ", ".join(f"{v:.3f}" for v in y[0, :N_GROUPS]) + " mV")
        assert worst < 1e-10, f"{variant}, t = {t} ms: {names[int(np.argmax(rel))]} differs by {worst:.3e}"
        # Same arithmetic in every variant: expect the fused kernel's numbers bit for bit (reported, not asserted:
        # the compiler may contract a multiply-add differently in differently organised code).
        if variant == "fused":
            _FUSED_SNAPS[t] = y[:, :N_GROUPS].copy()
        elif t in _FUSED_SNAPS:
            same = int((y[:, :N_GROUPS] == _FUSED_SNAPS[t]).all(axis=1).sum())
            print(f"    states bitwise equal to the fused kernel's: {same}/41")


def test_registers_and_spills(gpu):
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    model = make("bondarenko", "apical")
    for fmad in (True, False):
        with CudaBackend(model, model.initial_state(1), fmad=fmad) as be:
            r = be.registers()
            print(f"cs_fused_euler (bondarenko, fmad={fmad}): {r['num_regs']} registers/thread, "
                  f"{r['local_size_bytes']} B local (spills) per thread, {r['const_size_bytes']} B constant, "
                  f"max {r['max_threads_per_block']} threads/block")
            assert r["num_regs"] > 0 and r["num_regs"] <= 255


@pytest.mark.parametrize("variant, when", [("fused", "t = 2.0001 ms"), ("original", "a time in (2, 2.001] ms")])
def test_nonfinite_is_reported(gpu, variant, when):
    """A NaN in one cell stops the launch's check with the cell, state and time named."""
    from cardiosim.runtime.errors import SimulationError
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    model = make("bondarenko", "apical")
    y = model.initial_state(1000)
    y[model.state_index("Cai"), 777] = np.nan
    with CudaBackend(model, y, variant=variant) as be:
        with pytest.raises(SimulationError) as e:
            be.advance(2.0, DT, 10)
        msg = str(e.value)
        print(msg)
        assert "cell 777" in msg and when in msg
        be.advance(2.0, DT, 10, check_range=False, check=False)   # the flag was cleared by the first check


@pytest.mark.parametrize("k", [1, 100])
def test_throughput_1e6_cells(gpu, k):
    from cardiosim.reaction.ode.cuda_backend import CudaBackend
    n = 1_000_000
    model = make("bondarenko", "apical")
    protocols, amps = _stimulus(n)
    with CudaBackend(model, model.initial_state(n)) as be:
        stim = be.stimulus(protocols, amps)
        launches = 2000 if k == 1 else 20
        be.advance(0.0, DT, k, stim)                     # warm-up
        be.synchronize()
        t0 = time.perf_counter()
        for i in range(launches):
            be.advance((i + 1) * k * DT, DT, k, stim, check=False)
        be.synchronize()
        wall = time.perf_counter() - t0
        be.check(0.0, DT)
        rate = n * k * launches / wall
        per = wall / launches
        bytes_moved = 2 * model.n_states * 8 * n          # one read and one write of the state per launch
        print(f"10^6 cells, k = {k}: {launches} launches in {wall:.3f} s ({per * 1e3:.3f} ms/launch): "
              f"{rate:.3g} cell-steps/s; state traffic {bytes_moved / per / 1e9:.0f} GB/s")
        assert rate > 0
