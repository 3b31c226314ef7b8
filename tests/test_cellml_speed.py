"""The generated C of a CellML model in the forms a compiler maps well (issue 26, part 1): constants a run does not
override folded into literals (per-run specialisation, cached by the set of overridden names), integer powers as
products. The GPU speed itself is measured on a GPU node (tests/test_cellml_gpu.py::test_cell_steps_per_second);
here, that the faster forms give the same numbers: C = NumPy to round-off for several override sets, and the
hand-written twins (tests/test_cellml.py) still equal the generated ones."""

from __future__ import annotations

import re

import numpy as np
import pytest

from conftest import ROOT, require_gcc

pytest.importorskip("myokit")

from cardiosim import cells                                       # noqa: E402

MODELS = ROOT / "models"
TT06 = MODELS / "ten_tusscher_model_2006_epi.cellml"
ORD = MODELS / "ohara_rudy_2011_endo.cellml"


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CARDIOSIM_CACHE", str(tmp_path_factory.getbasetemp() / "cache"))


def _header(model) -> str:
    return (model.kernel_header_dir / f"{model.kernel_name}.h").read_text()


def test_constants_folded_unless_overridden():
    cls = cells.model_class(str(TT06))
    plain = cls()
    text = _header(plain)
    assert re.findall(r"(?<!&)CS_PARAM\(\d+\)", text) == []              # every constant a literal
    assert plain.kernel_header_dir != cls.kernel_header_dir               # the class keeps the general header
    a = cls(overrides={"g_Kr": 0.1})
    b = cls(overrides={"g_Kr": 0.2})
    assert a.kernel_header_dir == b.kernel_header_dir                     # one kernel for every value of g_Kr
    read = {int(i) for i in re.findall(r"(?<!&)CS_PARAM\((\d+)\)", _header(a))}
    names = list(cls.PARAMETER_ORDER) + list(cls.DERIVED_ORDER)
    # kept: g_Kr and the one derived constant computed from it (g_Kr·sqrt(K_o/5.4)), which the code reads
    kept = a.kept_parameters()
    assert {names[i] for i in kept} == {"g_Kr", names[max(kept)]} and read == {max(kept)}


def test_integer_powers_are_products():
    text = _header(cells.model_class(str(ORD))())
    assert not re.search(r"pow\([^;]*, (-?[2-8](\.0)?)\)", text)
    assert "_pow2(" in text and "_pow3(" in text


@pytest.mark.parametrize("overrides", [{}, {"g_Kr": 0.3}, {"g_Na": 10.0, "K_o": 7.0}])
def test_specialised_c_equals_numpy(overrides):
    """C (specialised to the overrides) against the NumPy twin at the initial state and at a depolarised one."""
    require_gcc()
    from cardiosim.reaction.ode.native import NativeModel
    model = cells.model_class(str(TT06))(overrides=overrides)
    nat = NativeModel(model)
    for v in (None, 10.0):
        y = model.initial_state(1)
        if v is not None:
            y[0] = v
        d = np.empty_like(y)
        model.rhs(0.0, y, -3.0, d)
        c = nat.rhs(y[:, 0], -3.0)
        scale = np.maximum(np.abs(d[:, 0]), 1e-12 * np.abs(d).max())
        assert np.max(np.abs(c - d[:, 0]) / scale) < 1e-12, overrides
