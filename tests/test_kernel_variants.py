"""The seed's CUDA kernel variants (cardiosim/reaction/ode/kernel_variants.py), checked on the CPU where they can be: the
generated one-local-per-intermediate right-hand side and the initialised constants are the same arithmetic and the
same numbers as the headers they come from. The GPU runs of every variant are in tests/test_cuda_kernels.py."""

import numpy as np
import pytest

from cardiosim.cells import make
from cardiosim.reaction.ode import kernel_variants as kv
from cardiosim.runtime.compile import kernel_dir
from cardiosim.reaction.ode.native import NativeModel
from cardiosim.cells.stimulus import Protocol

from conftest import needs, run_cli


@pytest.fixture(scope="module")
def header():
    return (kernel_dir() / "bondarenko.h").read_text()


def test_hoisted_rhs_gives_identical_numbers(header):
    """The 'original' form (every intermediate a function-scope local) compiled by gcc: bit-identical states through
    an upstroke, for a stimulated and an unstimulated cell."""
    hoisted = kv.hoist_locals(header, "bondarenko_rhs")
    body = hoisted.split("bondarenko_rhs(")[1].split("{", 1)[1]
    assert "one local per intermediate (162)" in body and "const double" not in body
    model = make("bondarenko", "apical")
    lean, orig = NativeModel(model), NativeModel(model, header_text=hoisted)
    ya = model.initial_state(2)
    yb = ya.copy()
    stim = [Protocol(1.0, 0.5, 0.0, 1)], np.array([[-80.0, 0.0]])
    for i in range(300):                            # 3 ms: rest, stimulus, upstroke
        lean.advance(ya, i * 0.01, 1e-4, 100, *stim)
        orig.advance(yb, i * 0.01, 1e-4, 100, *stim)
    assert ya[0, 0] > 0.0 > ya[0, 1]
    assert np.array_equal(ya, yb)


def test_hoisting_refuses_what_it_cannot_keep_equal():
    src = "void f(const double *y, double *d)\n{\n    { const double a = y[0]; d[0] = a; }\n" \
          "    { const double a = y[1]; d[1] = a; }\n}\n"
    with pytest.raises(ValueError, match="a is declared twice"):
        kv.hoist_locals(src, "f")
    with pytest.raises(ValueError, match="no function g"):
        kv.hoist_locals(src, "g")


def test_initialised_constants_are_the_parameter_vector(header):
    model = make("bondarenko", "septal", {"g_Na": 12.5})
    p = model.parameter_vector()
    decls = kv.constant_declarations(header, p).splitlines()
    assert len(decls) == p.size
    assert decls[0].startswith("__constant__ double c_BP_Acap = ")
    values = [float.fromhex(d.split("= ")[1].split(";")[0]) for d in decls]
    assert np.array_equal(values, p)                # exact: hexadecimal literals


def test_every_variant_has_a_source(header):
    """The generated sources differ where the variants differ, and nowhere else."""
    model = make("bondarenko", "apical")
    fused = (kernel_dir() / "fused.cu").read_text()
    srcs = {}
    for name, v in kv.VARIANTS.items():
        src, defines = kv.source(fused, header, "bondarenko", model.parameter_vector(), v)
        srcs[name] = src
        assert f"-DCS_AUX={int(v.aux)}" in defines
        assert ("__constant__ double c_BP_" in src) == v.initialised_params
        assert ("one local per intermediate" in src) == v.hoisted_locals
        assert (kv.INCLUDE_LINE in src) != v.hoisted_locals
    assert len(set(srcs.values())) == len(srcs)


def test_variant_names_are_checked():
    assert kv.get("original", "bondarenko").aux
    with pytest.raises(ValueError, match="choose one of original, lean-registers"):
        kv.get("fast", "bondarenko")
    with pytest.raises(ValueError, match="use 'fused' for tt06"):
        kv.get("no-aux", "tt06")


@pytest.mark.parametrize("cell, message", [
    ('model = "tt06"\nkernel = "no-aux"', "cell.kernel: kernel variant 'no-aux' exists for bondarenko only"),
    ('kernel = "quick"', "cell.kernel: 'quick' is not allowed"),
    ('model = "bondarenko"\nintegrator = "rush-larsen"', "cell.integrator: 'rush-larsen' needs a model"),
    ('model = "tt06"\nintegrator = "rush-larsen"\nkernel = "original"', "cell.kernel: kernel variant 'original' exists"),
])
def test_bad_kernel_choices(tmp_path, cell, message):
    cfg = tmp_path / "c.toml"
    cfg.write_text(f"[simulation]\nduration = 1.0\ndt = 0.01\n[grid]\nsize = [0.1]\nspacing = 0.01\n"
                   f"[cell]\n{cell}\n")
    r = run_cli(["config", "check", cfg])
    assert r.returncode == 2
    assert message in r.stderr, r.stderr


PTXAS_12 = """ptxas info    : 1936 bytes gmem, 1936 bytes cmem[3]
ptxas info    : Compiling entry function 'cs_fused_euler' for 'sm_90'
ptxas info    : Function properties for cs_fused_euler
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 238 registers, 624 bytes cmem[0]
ptxas info    : Function properties for __internal_accurate_pow
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
"""


def test_ptxas_report_is_parsed():
    from cardiosim.reaction.ode.ptxas import parse
    r = parse(PTXAS_12)
    assert (r["registers"], r["stack_frame"], r["spill_stores"], r["spill_loads"]) == (238, 8, 4, 12)
    assert r["cmem"] == {3: 1936, 0: 624}
    with pytest.raises(RuntimeError, match="no ptxas report for other"):
        parse(PTXAS_12, "other")


def test_kernels_command(tmp_path):
    """Compiled fresh by nvcc where the toolkit is installed (no GPU needed); one clear line where it is not."""
    import json
    import shutil
    out = tmp_path / "k.json"
    r = run_cli(["kernels", "--arch", "sm_90", "--variant", "original", "--variant", "fused", "--json", out])
    if not shutil.which("nvcc"):
        assert r.returncode == 2 and "nvcc (the CUDA toolkit) is not on PATH" in r.stderr
        needs("nvcc", False, "nvcc is not on PATH (the one-line refusal above was checked)")
    assert r.returncode == 0, r.stderr
    print("\n" + r.stdout)
    rows = json.loads(out.read_text())
    assert [x["variant"] for x in rows] == ["original", "fused"]
    for x in rows:
        assert 0 < x["registers"] <= 255
        # the module's __constant__ data: parameters, state ranges, pulse trains (the same in both forms)
        assert x["cmem"]["3"] == 96 * 8 + 2 * 41 * 8 + 16 * 4 * 8
