"""The cell kernel's run-time launch switches (issue 26), on the CPU: $CARDIOSIM_CELL_MAXRREG reaches nvcc's options
and $CARDIOSIM_CELL_BLOCK the block size; unset (or "auto"), the fused kernel's cap is auto_cap's, chosen after a first
compile from its register count; "none" leaves the kernel uncapped; the occupancy arithmetic of ptxas.warps_per_sm."""

import shutil

import pytest

from cardiosim.reaction.ode import cuda_backend as cb
from cardiosim.reaction.ode.ptxas import warps_per_sm


def test_unset_cap_leaves_the_static_options_as_they_were():
    for env in ({}, {cb.MAXRREG_ENV: ""}, {cb.MAXRREG_ENV: "none"}, {cb.MAXRREG_ENV: " "}, {cb.MAXRREG_ENV: "auto"}):
        assert cb.nvcc_options(True, (), env) == ["--fmad=true"]
        assert cb.nvcc_options(False, ("-lineinfo",), env) == ["--fmad=false", "-lineinfo"]
        assert cb.register_cap_options(env) == []


def test_cap_reaches_the_nvcc_options():
    env = {cb.MAXRREG_ENV: "168"}
    assert cb.register_cap_options(env) == ["-maxrregcount=168"]
    assert cb.nvcc_options(True, ("-lineinfo",), env) == ["--fmad=true", "-maxrregcount=168", "-lineinfo"]
    # a cap the caller names wins (nvcc refuses two)
    assert cb.nvcc_options(True, ("-maxrregcount=128",), env) == ["--fmad=true", "-maxrregcount=128"]


def test_cap_from_the_process_environment(monkeypatch):
    monkeypatch.setenv(cb.MAXRREG_ENV, "128")
    assert cb.nvcc_options() == ["--fmad=true", "-maxrregcount=128"]
    monkeypatch.delenv(cb.MAXRREG_ENV)
    assert cb.nvcc_options() == ["--fmad=true"]


@pytest.mark.parametrize("bad", ["abc", "8", "256", "12.5"])
def test_bad_cap_is_refused(bad):
    with pytest.raises(ValueError, match=cb.MAXRREG_ENV):
        cb.register_cap_options({cb.MAXRREG_ENV: bad})


def test_block_size():
    assert cb.default_block({}) == cb.DEFAULT_BLOCK == 128
    assert cb.default_block({cb.BLOCK_ENV: "256"}) == 256
    for bad in ("100", "0", "2048", "x"):
        with pytest.raises(ValueError, match=cb.BLOCK_ENV):
            cb.default_block({cb.BLOCK_ENV: bad})


def test_warps_per_sm_on_sm90():
    """cuda_occupancy.h's register limit: 4 sub-partitions of 16,384 registers, 256-register granules per warp."""
    assert [warps_per_sm(r, 128) for r in (255, 238, 192, 168, 162, 128, 96, 64)] == [8, 8, 8, 12, 12, 16, 20, 32]
    assert [warps_per_sm(r, 256) for r in (238, 192, 168, 128, 96, 64)] == [8, 8, 8, 16, 16, 32]
    assert warps_per_sm(32, 1024) == 64            # the 64-warp limit


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not on PATH")
def test_cap_reaches_ptxas(monkeypatch):
    """cardiosim kernels (ptxas.report) compiles with the cap of the environment, as the CUDA backend does."""
    from cardiosim.cells import make
    from cardiosim.reaction.ode import ptxas
    monkeypatch.setenv(cb.MAXRREG_ENV, "128")
    row = ptxas.report(make("tt06"), ["fused"], "sm_90")[0]
    assert row["registers"] <= 128 and row["maxrreg"] == 128
    assert "-maxrregcount=128" in ptxas.table([row])


def test_auto_cap_follows_occupancy():
    """The caps measured on an H200 (docs/benchmarks.md, "Session 13"): more warps per SM, or none."""
    assert cb.auto_cap(238, 128) == 168          # Bondarenko: 8 -> 12 warps
    assert cb.auto_cap(240, 128) == 168          # O'Hara-Rudy
    assert cb.auto_cap(162, 128) == 128          # TT06: 12 -> 16 warps (168 would give none)
    assert cb.auto_cap(238, 256) == 128          # in blocks of 256, 168 leaves 8 warps: 128 gives 16
    assert cb.auto_cap(128, 128) is None and cb.auto_cap(96, 128) is None
    for regs, block in ((238, 128), (162, 128), (238, 256), (200, 64)):
        cap = cb.auto_cap(regs, block)
        assert cap is None or warps_per_sm(cap, block) > warps_per_sm(regs, block)
    assert cb.auto_cap_enabled({}) and cb.auto_cap_enabled({cb.MAXRREG_ENV: "auto"})
    assert not cb.auto_cap_enabled({cb.MAXRREG_ENV: "none"}) and not cb.auto_cap_enabled({cb.MAXRREG_ENV: "168"})


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not on PATH")
def test_auto_cap_reaches_ptxas(monkeypatch):
    """cardiosim kernels reports the fused kernel as the backend compiles it: Bondarenko under the cap of 168,
    uncapped with $CARDIOSIM_CELL_MAXRREG=none."""
    from cardiosim.cells import make
    from cardiosim.reaction.ode import ptxas
    monkeypatch.delenv(cb.MAXRREG_ENV, raising=False)
    row = ptxas.report(make("bondarenko"), ["fused"], "sm_90")[0]
    assert row["maxrreg"] == 168 and row["registers"] <= 168
    monkeypatch.setenv(cb.MAXRREG_ENV, "none")
    row = ptxas.report(make("bondarenko"), ["fused"], "sm_90")[0]
    assert "maxrreg" not in row and row["registers"] > 168


def test_euler_in_rhs_only_where_the_header_takes_it(monkeypatch):
    """-DCS_EULER_IN_RHS=1 (kernels/fused.cu: the update where each derivative is assigned) for the fused Forward-Euler
    kernel of a header whose right-hand side takes CS_DERIV_T (Bondarenko's); not for the seed's variants (which pass
    their own derivative type), a Rush-Larsen step, TT06's header (a plain double *), or with the switch at 0."""
    from cardiosim.cells import make
    from cardiosim.reaction.ode import kernel_variants

    def flagged(name, variant="fused", integrator="forward-euler"):
        model = make(name)
        v = kernel_variants.get(variant, model.kernel_name)
        opts = cb.kernel_source(model, model.parameter_vector(), v, integrator)[1]
        return "-DCS_EULER_IN_RHS=1" in opts

    monkeypatch.delenv(cb.EULER_IN_RHS_ENV, raising=False)
    assert flagged("bondarenko")
    assert not flagged("bondarenko", "original") and not flagged("bondarenko", "all")
    assert not flagged("tt06") and not flagged("tt06", integrator="rush-larsen")
    monkeypatch.setenv(cb.EULER_IN_RHS_ENV, "0")
    assert not flagged("bondarenko")


@pytest.mark.skipif(not shutil.which("nvcc"), reason="nvcc is not on PATH")
def test_euler_in_rhs_frees_registers(monkeypatch):
    """What the flag is for: Bondarenko's uncapped fused kernel needs fewer registers (238 -> 194 with nvcc 13, sm_90)
    and spills less under the cap of 168 the runs use (284 -> 124 bytes)."""
    from cardiosim.cells import make
    from cardiosim.reaction.ode import ptxas
    rows = {}
    for flag in ("1", "0"):
        monkeypatch.setenv(cb.EULER_IN_RHS_ENV, flag)
        monkeypatch.setenv(cb.MAXRREG_ENV, "none")
        free = ptxas.report(make("bondarenko"), ["fused"], "sm_90")[0]
        monkeypatch.setenv(cb.MAXRREG_ENV, "168")
        capped = ptxas.report(make("bondarenko"), ["fused"], "sm_90")[0]
        rows[flag] = (free["registers"], capped["spill_stores"])
    assert rows["1"][0] < rows["0"][0] - 20 and rows["1"][1] < rows["0"][1], rows
