"""The cell kernel's run-time launch switches, on the CPU: $CARDIOSIM_CELL_MAXRREG reaches nvcc's options
and $CARDIOSIM_CELL_BLOCK the block size; unset (or "auto"), the fused kernel's cap is auto_cap's, chosen after a first
compile from its register count; "none" leaves the kernel uncapped; the occupancy arithmetic of cuda_backend.warps_per_sm."""

import shutil

import pytest

from cardiosim.reaction.ode import cuda_backend as cb
from cardiosim.reaction.ode.cuda_backend import warps_per_sm


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
    """The caps measured on an H200 (docs/decisions/0022-cell-kernel-register-cap-by-occupancy.md): more warps per
    SM, or none."""
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
