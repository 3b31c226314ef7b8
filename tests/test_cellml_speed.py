"""The generated C of a CellML model in the forms a compiler maps well: constants a run does not
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

from cardiosim import cells  # noqa: E402

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
        # 1e-12 before the C shared the exponentials of V (cse.shared_exponentials): exp(b)·exp(a·V) for
        # exp(a·V + b) is a few ulp off, which a gate near its steady state amplifies in (x_inf − x)/τ (5e-12 at
        # TT06's rest, Xr2; its states along a beat still equal the hand model's to 1e-12, tests/test_cellml.py)
        assert np.max(np.abs(c - d[:, 0]) / scale) < 1e-10, overrides


# -- common subexpressions and reciprocals (cardiosim/cells/cse.py) ---------------------------------------------------
def _numpy_twin(path, cse):
    from cardiosim.cells import cellml
    ns: dict = {}
    exec(cellml.generate(path, cse=cse)["numpy_source"], ns)
    return ns["step"]


@pytest.mark.parametrize("path", [TT06, ORD], ids=["tt06", "ohara_rudy"])
def test_common_subexpressions_keep_every_bit_of_the_numpy_twin(path):
    """The NumPy twin with its common subexpressions computed once gives the very numbers of the equations as
    Myokit has them (no reciprocals there: they would change the rounding): derivatives, Rush-Larsen and GRL1
    steps, at rest and at depolarised states."""
    model = cells.model_class(str(path))()
    c = model.parameter_vector()
    y = model.initial_state(4)
    y[0] = [-85.0, -40.0, 0.5, 20.0]
    plain, cse = _numpy_twin(path, False), _numpy_twin(path, True)
    for rl in (0, 1, 2):
        a, b = np.empty_like(y), np.empty_like(y)
        with np.errstate(all="ignore"):
            plain(y, -3.0, c, a, 0.01, rl)
            cse(y, -3.0, c, b, 0.01, rl)
        np.testing.assert_array_equal(a, b)


def test_generated_c_evaluates_each_exponential_once():
    """O'Hara-Rudy's C: fewer exp() calls and divisions than the equations as Myokit has them (GRL1's Jacobian
    repeats the model's exponentials; shared divisors become one reciprocal each), and none of its repeated exp()
    arguments is left evaluated twice in one function body."""
    from cardiosim.cells import cellml
    model = cells.model_class(str(ORD))()
    text = _header(model)
    plain = cellml.fold_constants(model, cellml.generate(ORD, cse=False)["c_header"])
    count = lambda t, s: t.count(s)                                       # noqa: E731
    assert count(text, "exp(") < 0.75 * count(plain, "exp(")              # measured: 168 against 241
    assert count(text, " / ") < 0.8 * count(plain, " / ")
    body = text[text.index("_step_("):text.index("if (rl) {")]        # the equations every integrator evaluates
    calls = re.findall(r"exp\(([^()]*(?:\([^()]*\))*[^()]*)\)", body)
    # exp() of a constant (numbers and temporaries made of numbers only, such as a singularity guard's points,
    # where division by a constant is a product by its reciprocal too) is folded by the compiler: not evaluated
    constant: set = set()
    for name, rhs in re.findall(r"const double (cse_\d+) = ([^;]*);", body):
        if all(t in constant for t in re.findall(r"(?<![\w.])[A-Za-z_]\w*", rhs) if t not in ("exp", "log", "sqrt")):
            constant.add(name)
    calls = [c for c in calls if any(t not in constant for t in re.findall(r"(?<![\w.])[A-Za-z_]\w*", c))]
    assert len(calls) == len(set(calls)), [c for c in set(calls) if calls.count(c) > 1][:3]


def test_cse_pass_on_small_expressions():
    """The pass itself: a repeated exp() is one temporary, a repeated divisor one reciprocal, nothing is hoisted
    out of a piecewise branch, and a temporary used once is written back."""
    import myokit
    from cardiosim.cells import cse
    x, y, b = myokit.Name("x"), myokit.Name("y"), myokit.Name("b")
    e1 = myokit.Exp(myokit.Divide(x, myokit.Number(7.0)))
    lhs = [("u", myokit.Plus(myokit.Divide(e1, b), myokit.Divide(y, b))),
           ("w", myokit.Multiply(e1, myokit.Number(2.0))),
           ("z", myokit.If(myokit.Less(x, y), myokit.Log(y), myokit.Log(y)))]
    keys = cse.Keys()
    rhs = cse.reciprocals([e for _, e in lhs], keys)
    counter = iter(range(100))
    scope = cse.eliminate(list(zip([n for n, _ in lhs], rhs)), keys, lambda: f"t{next(counter)}")
    code = {name: e.code() for name, e in scope.assignments}
    temps = [n for n in code if n.startswith("t")]
    assert sorted(code[t] for t in temps) == ["1 / str:b", "exp(str:x * (1 / 7))"]
    t_exp = next(t for t in temps if code[t].startswith("exp"))
    assert f"str:{t_exp}" in code["u"] and f"str:{t_exp}" in code["w"] and " / " not in code["u"]
    assert code["z"] == "if(str:x < str:y, log(str:y), log(str:y))"           # a branch keeps its own work
    assert list(code).index(t_exp) < list(code).index("u")                     # defined before its first use


def test_bench_cell_steps_runs_both_forms(tmp_path):
    """`cardiosim bench cell-steps` on a small model: both forms compiled and timed, a row per integrator, the JSON
    and the markdown section written."""
    require_gcc()
    import json
    from conftest import run_cli
    page, out = tmp_path / "b.md", tmp_path / "b.json"
    run_cli(["bench", "cell-steps", "--models", "luo_rudy_1991", "--cells", "20", "--steps", "5", "--repeats", "1",
             "--write", page, "--json", out], check=True)
    rows = json.loads(out.read_text())["results"]
    assert [r["integrator"] for r in rows] == ["forward-euler", "rush-larsen", "grl1"]
    assert all(r["plain_steps_per_s"] > 0 and r["cse_steps_per_s"] > 0 for r in rows)
    assert "| luo_rudy_1991 | grl1 |" in page.read_text()


@pytest.mark.parametrize("name", ["noble_model_2001", "pasek_simurda_christe_2006"])
def test_c_is_the_twin_with_the_same_products(name):
    """Where C's derivatives differ most from the NumPy twin's (bench cellml's column: up to 4e-7 relative to the
    state's own derivative, Noble 2001's xr2 at its steady state, -3.7e-15 as the difference of two nearly equal
    terms; Pasek 2006's Vms, a sum of currents that nearly cancel), the difference is the reciprocals' rounding and
    nothing else: the same NumPy twin with the C's products gives the C's numbers, to what glibc's exp against
    NumPy's leaves there (6.2e-9 for Noble's xr2, as without the products; 0 for Pasek)."""
    require_gcc()
    from cardiosim.cells import cellml
    from cardiosim.reaction.ode.native import NativeModel
    path = ROOT / "models" / f"{name}.cellml"
    model = cells.model_class(str(path))()
    y0 = model.initial_state(1)
    c = NativeModel(model).rhs(y0[:, 0], 0.0)
    ns: dict = {}
    exec(cellml.generate(path, numpy_like_c=True)["numpy_source"], ns)
    twin, like_c = np.empty_like(y0), np.empty_like(y0)
    with np.errstate(all="ignore"):
        model.rhs(0.0, y0, 0.0, twin)
        ns["step"](y0, 0.0, model.parameter_vector(), like_c, 0.0, 0)
    floor = 1e-12 * np.abs(twin).max()
    assert np.max(np.abs(c - twin[:, 0]) / np.maximum(np.abs(twin[:, 0]), floor)) > 1e-8      # amplified here
    assert np.max(np.abs(c - like_c[:, 0]) / np.maximum(np.abs(like_c[:, 0]), floor)) < 1e-8


def test_exponentials_of_v_shared_and_no_pow_left():
    """TT06's exponentials of V with related scales (V/5, V/10, V/20, ±V/7, ...) share one exp() each, and
    no pow() is left where the exponent is -1, 1.5 or a parameter that is a small integer (Bondarenko's Cass^n,
    Courtemanche's (...)^-1): pow costs a log and an exp on a GPU."""
    from cardiosim.cells import cellml
    tt06 = cells.model_class(str(TT06))()
    body = lambda t: t[t.index("_step_("):t.index("if (rl) {")]             # noqa: E731
    text = body(_header(tt06))
    plain = body(cellml.fold_constants(tt06, cellml.generate(TT06, cse=False)["c_header"]))
    v = re.findall(r"exp\((-?[0-9.e+-]+) \* v_membrane__V\)", text)
    assert len(v) < 12 and len(set(v)) == len(v)                          # one exp per family of scales
    of_v = lambda t: [a for a in re.findall(r"exp\(([^()]*(?:\([^()]*\))*[^()]*)\)", t)  # noqa: E731
                      if "v_membrane__V" in a]                            # exp(b) of a constant b is folded
    assert len(of_v(text)) < 0.7 * len(of_v(plain)), (len(of_v(text)), len(of_v(plain)))
    for name in ("bondarenko_szigeti_bett_kim_rasmusson_2004_apical", "courtemanche_ramirez_nattel_1998"):
        assert "pow(" not in body(_header(cells.model_class(str(MODELS / f"{name}.cellml"))()))


def test_an_exponential_of_zero_times_v_is_left_alone():
    """A file's own 0·V inside an exponential (Fink–Noble–Giles 2008) is no exponential of V: the sharing pass once
    divided by its zero scale and the model did not generate."""
    from cardiosim.cells import cellml
    g = cellml.generate(MODELS / "fink_noble_giles_model_2008.cellml")
    assert "c_header" in g and g["states"]


def test_paired_reciprocals_only_for_bounded_functions_of_v():
    """Generator 7 (docs/decisions/0021-generated-kernels-at-hand-written-speed.md): two divisions by different
    functions of V alone become one reciprocal of their product, but only where each divisor stays within 10^±50 for
    |V| ≤ 200 mV (a product of two unbounded denominators overflows where neither does), not for a divisor that reads
    another state, and the rewritten expressions keep their values."""
    import myokit
    from cardiosim.cells import cse
    m = myokit.parse_model("""
[[model]]
c.V = -80
c.Ca = 1e-4
[c]
t = 0 bind time
dot(V) = a + b + s + q
dot(Ca) = -Ca / 100
a = 1 / (1 + exp(-(V + 20) / 7))
b = 3 / (0.5 + exp((V + 10) / 9))
s = 1 / (1 + exp(V / 1))
q = 2 / (Ca + 0.01 * exp(V / 20))
""")
    V, Ca = m.get("c.V"), m.get("c.Ca")
    body = [m.get(f"c.{n}") for n in "absq"]
    exprs = [x.rhs() for x in body]
    constant = lambda e: not any(isinstance(n, myokit.Name) and not n.var().is_constant()   # noqa: E731
                                 for n in e.walk(myokit.Name))
    out = cse.paired_reciprocals(exprs, dict(zip(body, exprs)), V, constant, cse.Keys(),
                                 {x: i for i, x in enumerate(body)})
    divisions = lambda e: sum(1 for q in e.walk(myokit.Divide) if not constant(q[1]))      # noqa: E731
    # a and b paired: the reciprocal of their product read by both; s (exp(V) reaches e^200) and q (reads Ca) alone
    assert divisions(out[0]) == 1 and divisions(out[1]) == 1
    inverse = lambda e: next(q for q in e.walk(myokit.Divide) if not constant(q[1])).code()  # noqa: E731
    assert inverse(out[0]) == inverse(out[1])
    assert out[2] is exprs[2] and out[3] is exprs[3]
    for v in (-200.0, -85.0, 0.0, 40.0, 200.0):
        sub = {myokit.Name(V): myokit.Number(v), myokit.Name(Ca): myokit.Number(2e-4)}
        for before, after in zip(exprs, out):
            assert after.eval(subst=sub) == pytest.approx(before.eval(subst=sub), rel=1e-14)


def test_power_minus_one_merged_and_nothing_left_unread():
    """CellML's x^(−1) is a quotient to merge (Bondarenko's buffers (1 + k/(K + c)²)^(−1) lose a division each), and
    an intermediate a merge left unread is not written: Courtemanche's header compiles under -Wall -Werror in
    tests/test_cellml.py; here, no line of the generated C assigns a name that nothing reads."""
    text = _header(cells.model_class(str(MODELS / "bondarenko_szigeti_bett_kim_rasmusson_2004_apical.cellml"))())
    body = text[text.index("_step_("):text.index("#ifndef __CUDACC__\n    if (rl)")]
    assert not re.search(r"\(1\.0 \+ [^;]*\)\s*\^|pow\(", body)
    for name in ("courtemanche_ramirez_nattel_1998", "bondarenko_szigeti_bett_kim_rasmusson_2004_apical"):
        text = _header(cells.model_class(str(MODELS / f"{name}.cellml"))())
        step = text[text.index("_step_("):]
        assigned = re.findall(r"const double (v_\w+) = ", step)
        unread = [n for n in assigned if len(re.findall(rf"\b{n}\b", step)) < 2]
        assert not unread, (name, unread[:5])
