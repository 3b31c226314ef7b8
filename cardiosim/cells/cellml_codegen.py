"""C and NumPy sources of a prepared Myokit cell model (cardiosim/cells/cellml.py prepares it and caches the output).

The C header has the shape of kernels/tt06.h: ``<name>_step_`` evaluates every equation once and writes either
dy/dt or one Rush–Larsen step (the gates x <- x_inf + (x − x_inf)·exp(−dt/τ), the rest Forward Euler), and the entry
points ``<name>_rhs`` and ``<name>_rush_larsen`` call it; CS_FN, CS_PARAM and CS_PARAM_ARG as in kernels/bondarenko.h,
so the CPU driver and the fused CUDA kernel take it unchanged. The NumPy module has the same body, vectorised over
cells (``step``), and ``derived`` fills the parameter vector's derived constants. Expressions are Myokit's own
(AnsiCExpressionWriter, NumPyExpressionWriter); the gates are those myokit.lib.hh recognises.
"""

from __future__ import annotations

import keyword
import re

from cardiosim.cells import cse


class Names:
    """User-facing names (short where unique, else component.name) and identifiers for C and Python."""

    def __init__(self, m):
        counts = {}
        for x in m.variables(deep=True):
            counts[x.name()] = counts.get(x.name(), 0) + 1
        self.user, self.ident = {}, {}
        taken = set()
        for x in m.variables(deep=True):
            user = x.name() if counts[x.name()] == 1 else x.qname()
            ident = re.sub(r"\W", "_", "v_" + x.qname().replace(".", "__"))
            while ident in taken or keyword.iskeyword(ident):
                ident += "_"
            taken.add(ident)
            self.user[x], self.ident[x] = user, ident


def gates_of(m, v) -> dict:
    """{state: ("inf-tau", x_inf, tau) or ("alpha-beta", alpha, beta)} for the states myokit.lib.hh recognises as
    Hodgkin–Huxley gates of the membrane potential ``v`` (variables or expressions)."""
    import myokit.lib.hh as hh
    gates = {}
    for s in list(m.states())[1:]:
        try:
            if hh.has_inf_tau_form(s, v):
                gates[s] = ("inf-tau", *hh.get_inf_and_tau(s, v))
            elif hh.has_alpha_beta_form(s, v):
                gates[s] = ("alpha-beta", *hh.get_alpha_and_beta(s, v))
        except Exception:                                    # a shape hh does not handle: Forward Euler
            pass
    return gates


def ordered(m):
    """Every variable with an equation, in an order in which each comes after those it uses."""
    out, seen = [], set()
    for eqs in m.solvable_order().values():
        for eq in eqs:
            var = eq.lhs.var()
            if var not in seen:
                seen.add(var)
                out.append(var)
    return out


def _constant(e) -> bool:
    """Numbers and parameters only: the specialised header makes 1/e a literal."""
    import myokit
    return all(isinstance(n.var(), myokit.Variable) and n.var().is_constant() for n in e.walk(myokit.Name)) \
        and not any(isinstance(n, (myokit.Derivative, myokit.PartialDerivative)) for n in e.walk())


def _c_writer(kname: str, constant=_constant):
    """Myokit's ANSI C writer with the forms a compiler maps well (it may not rewrite them itself without
    -ffast-math, which cardiosim does not use: the NumPy reference and the GPU must agree to round-off):

    * integer powers x^n (|n| <= 8) as products by repeated squaring (``<kname>_pow<n>``: pow() costs a log and an
      exp, ~100 FP64 instructions on a GPU, a product one); x^-1 as 1/x, x^0.5 as sqrt(x), x^-0.5 as 1/sqrt(x),
      x^1.5 (2.5, 3.5) as x·sqrt(x) (...);
    * x^p with p made of parameters (``constant(p)``) as ``<kname>_powc(x, p)``: the products above where p is a
      small integer (a literal once specialised, so the test is folded), else pow;
    * a^x for a constant number a as exp(x·ln a), ln a folded by the compiler (one exp instead of pow).

    ``used`` collects the powers the header must define (:func:`_pow_helpers`)."""
    import myokit
    from myokit.formats.ansic import AnsiCExpressionWriter

    class Writer(AnsiCExpressionWriter):
        used: set = set()

        def _ex_partial_derivative(self, e):
            return self._flhs(e)

        def _ex_power(self, e):
            base, ex = e[0], e[1]
            numeric = isinstance(ex, myokit.Number) or not any(True for _ in ex.walk(myokit.Name))
            if numeric:                                       # a number, or numbers only (Myokit's -1 is -(1))
                n = float(ex.eval())
                if n == int(n) and 2 <= abs(n) <= 8:
                    n = int(n)
                    self.used.add(abs(n))
                    call = f"{kname}_pow{abs(n)}({self.ex(base)})"
                    return call if n > 0 else f"(1.0 / {call})"
                if n == 1:
                    return f"({self.ex(base)})"
                if n == -1:
                    return f"(1.0 / ({self.ex(base)}))"
                if n == 0.5:
                    return f"sqrt({self.ex(base)})"
                if n == -0.5:
                    return f"(1.0 / sqrt({self.ex(base)}))"
                if abs(n) in (1.5, 2.5, 3.5):
                    self.used.add(abs(n))
                    call = f"{kname}_pow{str(abs(n)).replace('.', '_')}({self.ex(base)})"
                    return call if n > 0 else f"(1.0 / {call})"
            elif constant(ex):
                # an exponent made of parameters (Bondarenko's Cass^n): a literal once the header is specialised,
                # for which the helper reduces to the product (pow costs a log and an exp)
                self.used.add("c")
                return f"{kname}_powc({self.ex(base)}, {self.ex(ex)})"
            if isinstance(base, myokit.Number) and base.eval() > 0:
                return f"exp(({self.ex(ex)}) * log({self.ex(base)}))"
            return super()._ex_power(e)
    w = Writer()
    w.used = set()
    return w


def _numpy_writer():
    from myokit.formats.python import NumPyExpressionWriter

    class Writer(NumPyExpressionWriter):
        def _ex_partial_derivative(self, e):
            return self._flhs(e)
    return Writer()


def diagonal_jacobian(m, states, body, gates) -> dict:
    """{state: (partials, a)} for every state that is not a gate: ``a`` is ∂f_s/∂s, the diagonal entry of the
    Jacobian that GRL1 linearises each state's own equation with (Sundnes, Artebrant, Skavhaug & Tveito 2009), as a
    Myokit expression, and ``partials`` the [(x, ∂x/∂s)] of the intermediates x it needs, in the body's order
    (each a Myokit expression in which ∂y/∂s of another intermediate y appears as a PartialDerivative: the chain
    rule written out, one variable per intermediate, as a compiler wants it)."""
    import myokit
    order = {x: i for i, x in enumerate(body)}
    out = {}
    for s in states:
        if s in gates:
            continue
        ds = myokit.Name(s)
        top = s.rhs().diff(ds)
        done: dict = {}
        todo = [top]
        while todo:
            e = todo.pop()
            for pd in e.walk(myokit.PartialDerivative):
                x = pd.dependent_expression().var()
                if x not in done:
                    done[x] = x.rhs().diff(ds)
                    todo.append(done[x])
        out[s] = (sorted(done.items(), key=lambda kv: order[kv[0]]), top)
    return out


def _common_subexpressions(body, states, jac, names, sidx, v, reciprocals=True, gates=None):
    """The body's equations and GRL1's diagonal Jacobian with their common subexpressions computed once and one
    reciprocal per repeated divisor (cardiosim/cells/cse.py): (body_code, grl_code). body_code: [(name,
    expression)] in order, the body's own names (d_<i> for a state's derivative, identifiers for intermediates)
    and temporaries cse_<n> between them. grl_code: {"temps": [(name, expression)] at the start of GRL1's block,
    "states": [(state, [(j_<ident>, ∂x/∂s expression)], a = ∂f/∂s expression)] per state that is not a gate}.
    The Jacobian reuses the body's values: a subexpression equal to an intermediate's equation is that
    intermediate. ``reciprocals``: also one reciprocal per repeated divisor (which changes the rounding of those
    quotients by up to an ulp), and the exponentials of the membrane potential ``v`` shared
    (cse.shared_exponentials: round-off too)."""
    import myokit
    keys = cse.Keys()
    counter = iter(range(1 << 30))

    def new_name():
        return f"cse_{next(counter)}"

    lhs = [f"d_{sidx[x]}" if x.is_state() else names.ident[x] for x in body]

    grl_states = [s for s in states if s in jac]
    labelled, flat = [], []
    for s in grl_states:
        partials, top = jac[s]
        for x, e in partials:
            labelled.append((s, "j_" + names.ident[x]))
            flat.append(e)
        labelled.append((s, None))
        flat.append(top)
    originals = [x.rhs() for x in body]
    rhs = originals
    if reciprocals:
        # exponentials of V shared (one exp per family of scales), in the body and the Jacobian alike
        def value(e):
            return float(e.eval())
        shared = cse.shared_exponentials(originals + flat, v, _constant, keys, value)
        rhs, flat = shared[:len(body)], shared[len(body):]
        rhs = cse.split_logs(rhs, _constant)
        infs = {g[1] for g in (gates or {}).values() if g[0] == "inf-tau"}
        keep = [i for i, x in enumerate(body) if x in infs]
        rhs = cse.merge_quotients(rhs, {x: e for x, e in zip(body, rhs) if not x.is_state()}, _constant, keys,
                                  keep=keep)
        rhs = cse.paired_reciprocals(rhs, {x: e for x, e in zip(body, rhs) if not x.is_state()}, v, _constant,
                                     keys, {x: i for i, x in enumerate(body)}, keep=keep)
        rhs = cse.reciprocals(rhs, keys, constant=_constant)
    # the intermediates by their equations first: the Jacobian's copies of them are those names, not temporaries
    whole = {}
    for name, original, rewritten in zip(lhs, originals, rhs):
        if not isinstance(original, (myokit.Name, myokit.Number, myokit.Derivative)):
            whole.setdefault(keys(original), myokit.Name(name))
            whole.setdefault(keys(rewritten), myokit.Name(name))
    divisors = {keys(q[1]) for e in rhs for q in e.walk(myokit.Divide)       # those the body inverts already
                if isinstance(q[0], myokit.Number) and q[0].eval() == 1.0}
    if reciprocals:
        flat = cse.reciprocals(flat, keys, extra_divisors=divisors, constant=_constant)
    flat = [cse.substitute(e, keys, whole) for e in flat]
    prologue = cse.eliminate(list(zip(lhs, rhs)), keys, new_name, later=flat)
    known = {**whole, **prologue.defined}
    grl = cse.eliminate(list(zip(labelled, flat)), keys, new_name, known=known, hoist_to_top=True,
                        private=(myokit.PartialDerivative,))
    temps = [(name, e) for name, e in grl.assignments if isinstance(name, str)]
    per_state = {s: ([], None) for s in grl_states}
    for label, e in grl.assignments:
        if isinstance(label, tuple):
            s, name = label
            if name is None:
                per_state[s] = (per_state[s][0], e)
            else:
                per_state[s][0].append((name, e))
    return prologue.assignments, {"temps": temps, "states": [(s, *per_state[s]) for s in grl_states]}


def _unread_dropped(code, gates, names):
    """``code`` (body_code, grl_code of :func:`_common_subexpressions`) without the intermediates nothing reads any
    more. A merged quotient reads through an intermediate to its own inputs (Courtemanche's τ = (α + β)^(−1) over
    the quotients α and β): where nothing else reads α and β, their lines would be dead code, which the C compiler
    drops but warns of (the device convention compiles with -Wall -Werror). The C only: the NumPy twin keeps every
    intermediate for `cardiosim cell --trace` (its values())."""
    import myokit
    body, grl = code

    def reads(e) -> set:
        out = set()
        for node in e.walk(myokit.Name):
            x = node.var()
            out.add(x if isinstance(x, str) else names.ident.get(x))
        return out

    needed = set()
    for _, a, b in gates.values():
        for x in (a, b):
            needed |= reads(myokit.Name(x) if isinstance(x, myokit.Variable) else x)
    for _, e in grl.get("temps", []):
        needed |= reads(e)
    for _, partials, top in grl.get("states", []):
        needed |= reads(top).union(*(reads(e) for _, e in partials))
    kept = []
    for name, e in reversed(body):            # a line reads only lines before it: one backward pass
        if name.startswith("d_") or name in needed:
            kept.append((name, e))
            needed |= reads(e)
    return list(reversed(kept)), grl


def _placements(code, states, gates, jac, names, sidx) -> dict:
    """Where each state's update goes in the body (code = (body_code, grl_code) of :func:`_common_subexpressions`):
    {index of the body line it follows (-1: before the first): [("temp", (name, expression)) | ("gate", state) |
    ("state", (state, partials, top))]}, in emission order. An update follows the last body line it reads (its
    derivative d_<i>, the intermediates and temporaries of its expressions); a GRL1 temporary goes just before its
    first reader (not after its own inputs: held from there it would be live through the body)."""
    import myokit
    body, grl = code
    pos = {name: k for k, (name, _) in enumerate(body)}
    temps = grl.get("temps", [])
    grl_temps = {name for name, _ in temps}

    def reads(e) -> set:
        """The names of body lines and GRL1 temporaries ``e`` reads."""
        out = set()
        for node in e.walk():
            if isinstance(node, myokit.PartialDerivative):       # GRL1's ∂x/∂s: defined inside the update itself
                continue
            if isinstance(node, myokit.Derivative):
                out.add(f"d_{sidx[node.var()]}")
            elif isinstance(node, myokit.Name):
                v = node.var()
                if isinstance(v, str):
                    out.add(v)
                elif not (v.is_state() or v.is_constant()) and v in names.ident:   # else read first, or a parameter
                    out.add(names.ident[v])
        return out

    earliest = {}                      # a GRL1 temporary's inputs are all computed after this body line

    def last(names_read) -> int:
        return max([-1] + [earliest[n] if n in grl_temps else pos.get(n, -1) for n in names_read])

    temp_reads = {}
    for name, e in temps:
        temp_reads[name] = reads(e)
        earliest[name] = last(temp_reads[name])
    updates = []
    for st in states:
        if st in gates:
            _, a, b = gates[st]
            r = set().union(*(reads(myokit.Name(x)) if isinstance(x, myokit.Variable) else reads(x) for x in (a, b)))
            updates.append((last(r), r, ("gate", st)))
    for st, partials, top in grl["states"]:
        r = {f"d_{sidx[st]}"}.union(reads(top), *(reads(e) for _, e in partials))
        updates.append((last(r), r, ("state", (st, partials, top))))
    first = {}                         # a GRL1 temporary's first reader, placed after this body line
    for at, r, _ in updates:
        for n in r & grl_temps:
            first[n] = min(first.get(n, at), at)
    for name, _ in reversed(temps):   # a temporary read by a later temporary goes no later than that one
        for n in temp_reads[name] & grl_temps:
            first[n] = min(first.get(n, first.get(name, earliest[name])), first.get(name, earliest[name]))
    out: dict = {}
    for name, e in temps:
        out.setdefault(first.get(name, earliest[name]), []).append(("temp", (name, e)))
    for at, _, item in updates:
        out.setdefault(at, []).append(item)
    return out


def _pow_helpers(kname: str, used) -> list[str]:
    """The helpers the writer used (``used``): ``<kname>_pow<n>(x)`` for an integer n, x^n by repeated squaring
    (x^8 = ((x²)²)², 3 products); ``<kname>_pow<m>_5(x)`` for n = m + ½, x^m·sqrt(x); ``<kname>_powc(x, p)`` ("c")
    for a parameter exponent."""
    out = []
    ints = sorted(n for n in used if isinstance(n, int))
    for n in sorted(n for n in used if isinstance(n, float)):            # x^(m + 1/2) = x^m·sqrt(x)
        m = int(n)
        prod = " * ".join(["x"] * m)
        out.append(f"CS_FN double {kname}_pow{str(n).replace('.', '_')}(double x) {{ return {prod} * sqrt(x); }}")
    if "c" in used:
        out.append(f"/* x^p for a parameter p: products where p is a small integer (a literal once specialised: the "
                   f"comparisons fold away), else pow */\n"
                   f"CS_FN double {kname}_powc(double x, double p)\n{{\n"
                   f"    if (p == 2.0) return x * x;\n    if (p == 3.0) return x * x * x;\n"
                   f"    if (p == 4.0) {{ const double x2 = x * x; return x2 * x2; }}\n"
                   f"    if (p == 1.0) return x;\n    if (p == -1.0) return 1.0 / x;\n"
                   f"    if (p == 0.5) return sqrt(x);\n    return pow(x, p);\n}}")
    for n in ints:
        terms, sq, k, body = [], "x", n, []
        level = 0
        while k:
            if k & 1:
                terms.append(sq)
            k >>= 1
            if k:
                level += 1
                body.append(f"const double x{level} = {sq} * {sq};")
                sq = f"x{level}"
        out.append(f"CS_FN double {kname}_pow{n}(double x) {{ {' '.join(body)} return {' * '.join(terms)}; }}")
    return out


def write(m, kname: str, origin: str, generator: str, cse: bool = True, numpy_like_c: bool = False) -> dict:
    """{"c_header", "numpy_source", "names" (Names), "states", "literals", "derived", "gates"} for the prepared
    model ``m`` (V first, the stimulus bound to ``pace``). ``kname``: the C name prefix; ``origin``, ``generator``:
    for the files' first line. Parameter vector: the literals, then the derived constants. ``cse``: common
    subexpressions once and one reciprocal per repeated divisor (:func:`_common_subexpressions`); False writes the
    equations as Myokit has them (for comparison). ``numpy_like_c``: the NumPy twin with the C's reciprocals too
    (for the tests: the C's arithmetic on the host, where its round-off against the twin is amplified)."""
    import myokit
    v = m.label("membrane_potential")
    names = Names(m)
    states = list(m.states())
    literals = [x for x in m.variables(deep=True) if x.is_literal() and x.binding() is None
                and not x.is_state() and x is not m.time()]
    derived = [x for x in ordered(m) if x.is_constant() and not x.is_literal()]
    # intermediates and derivatives in one solvable order: a model may use dot(x) in another equation
    body = [x for x in ordered(m) if not x.is_constant() and x.binding() is None and x is not m.time()]
    i_stim = m.binding("pace")
    pindex = {x: i for i, x in enumerate(literals + derived)}
    gates = gates_of(m, v)
    jac = diagonal_jacobian(m, states, body, gates)
    sidx = {s: i for i, s in enumerate(states)}

    def namer(param: str):
        """The left-hand-side names of one writer: derivatives, the stimulus, parameters as ``param`` (a format
        of the parameter's index), the rest by their identifiers."""
        def name(lhs):
            if isinstance(lhs, myokit.PartialDerivative):        # ∂x/∂s in GRL1's diagonal Jacobian
                return "j_" + names.ident[lhs.dependent_expression().var()]
            var = lhs.var()
            if isinstance(var, str):                             # a temporary of cardiosim/cells/cse.py, d_<i>
                return var
            if isinstance(lhs, myokit.Derivative):
                return f"d_{sidx[var]}"
            if var is i_stim:
                return "i_stim"
            if var in pindex:
                return param.format(pindex[var])
            return names.ident[var]
        return name
    cw = _c_writer(kname)
    cw.set_lhs_function(namer("CS_PARAM({})"))
    pw = _numpy_writer()
    pw.set_lhs_function(namer("c[{}]"))

    def gate_parts(writer, s):
        kind, a, b = gates[s]
        ex = writer.ex
        ea = ex(myokit.Name(a)) if isinstance(a, myokit.Variable) else ex(a)
        eb = ex(myokit.Name(b)) if isinstance(b, myokit.Variable) else ex(b)
        if kind == "inf-tau":
            return ea, f"(1.0 / ({eb}))"
        return f"({ea}) / (({ea}) + ({eb}))", f"(({ea}) + ({eb}))"

    up = kname.upper()
    n_s, n_p = len(states), len(literals) + len(derived)
    # C: common subexpressions and reciprocals; NumPy: common subexpressions only, so that the NumPy twin stays
    # bit for bit Myokit's own evaluation of the equations (tests/test_cellml.py)
    if cse:
        code = {cw: _common_subexpressions(body, states, jac, names, sidx, v, reciprocals=True, gates=gates),
                pw: _common_subexpressions(body, states, jac, names, sidx, v, reciprocals=numpy_like_c,
                                           gates=gates)}
    else:                     # the equations as Myokit wrote them (cardiosim bench cell-steps compares the two forms)
        plain = ([(f"d_{sidx[x]}" if x.is_state() else names.ident[x], x.rhs()) for x in body],
                 {"temps": [], "states": [(s, [("j_" + names.ident[x], e) for x, e in jac[s][0]], jac[s][1])
                                          for s in states if s in jac]})
        code = {cw: plain, pw: plain}
    if cse:
        code[cw] = _unread_dropped(code[cw], gates, names)
    placed = _placements(code[cw], states, gates, jac, names, sidx)     # the GPU's order (below)

    def prologue(writer, line):
        """The states read from y, then the body's equations (d_<i> for a state's derivative, intermediates by
        name) with their common subexpressions (cse_<n>), each as ``line`` formats a name and its expression: the
        same in every function generated."""
        out = [line.format(names.ident[s_], f"y[{sidx[s_]}]") for s_ in states]
        return out + [line.format(name, writer.ex(e)) for name, e in code[writer][0]]

    c = [f"/* {kname}.h: generated by cardiosim/cells/cellml.py (generator {generator}, Myokit "
         f"{myokit.__version__}) from {origin}; do not edit.",
         " * Conventions: kernels/bondarenko.h (CS_FN, CS_PARAM, CS_PARAM_ARG). Units: ms, mV; i_stim in µA/µF, "
         "negative depolarises.",
         f" * Rush-Larsen: {len(gates)} gates exactly for frozen V, the other states by Forward Euler;",
         " * GRL1 (_grl1): the gates as in Rush-Larsen, every other state by its own linearisation (Sundnes 2009). */",
         f"#ifndef CARDIOSIM_{up}_H", f"#define CARDIOSIM_{up}_H", "#ifndef __CUDACC__", "#include <math.h>",
         "#endif", "#ifndef CS_FN", "#define CS_FN static inline", "#endif", "#ifndef CS_PARAM_ARG",
         "#define CS_PARAM_ARG , const double *p", "#endif", "#ifndef CS_PARAM", "#define CS_PARAM(i) (p[(i)])",
         "#endif", f"#define {up}_N_STATES {n_s}", f"#define {up}_N_PARAMS {n_p}", "",
         f"CS_FN void {kname}_step_(const double *y, double *out, double i_stim, double dt, int rl, "
         "const double *p)", "{", "    (void)p; (void)dt; (void)i_stim;"]
    # rl: 0 derivatives, 1 Rush-Larsen (gates exact for frozen V, the rest Forward Euler), 2 GRL1 (the gates as in
    # Rush-Larsen, every other state by its own linearisation, exact for a linear equation in that state). On the
    # GPU each state's update is written where its last input has been computed, not after the whole body: the
    # body's intermediates then die as they are used, where after the body they were all live at once (GRL1's
    # diagonal Jacobian needs most of them: O'Hara-Rudy spilled ~5 kB per cell-step). y is read into locals first,
    # so writing out (= y, in place) early changes nothing the body reads.
    def gate_update(st) -> str:
        inf, rate = gate_parts(cw, st)
        return (f"{{ const double inf_ = {inf}; out[{sidx[st]}] = inf_ + ({names.ident[st]} - inf_) * "
                f"exp(-dt * {rate}); }}")

    def grl_update(st, partials, top, indent) -> list[str]:
        i = sidx[st]
        return ([f"{indent}const double {n_} = {cw.ex(e_)};" for n_, e_ in partials]
                + [f"{indent}out[{i}] = {kname}_grl_({names.ident[st]}, d_{i}, {cw.ex(top)}, dt);"])

    lines = prologue(cw, "    const double {} = {};")     # the states read, then one line per body equation
    c += lines[:len(states)]
    for at in range(-1, len(code[cw][0])):
        if at >= 0:
            c.append(lines[len(states) + at])
        items = placed.get(at, ())
        if items:
            c.append("#ifdef __CUDACC__")
        for kind, item in items:
            if kind == "temp":        # GRL1's only: not computed for the other steps
                c.append(f"    double {item[0]} = 0.0; if (rl == 2) {item[0]} = {cw.ex(item[1])};")
            elif kind == "gate":
                c.append(f"    if (rl) {gate_update(item)}")
            else:
                st = item[0]
                c += ["    if (rl == 2) {", *grl_update(*item, "        "),
                      f"    }} else if (rl) {{ out[{sidx[st]}] = {names.ident[st]} + dt * d_{sidx[st]}; }}"]
        if items:
            c.append("#endif")
    # The host keeps the updates after the whole body: gcc on x86 ran the interleaved Rush-Larsen step 15 % slower
    # (O'Hara-Rudy, one core), where the GPU's registers gain from it. The same expressions in both orders.
    c += ["#ifndef __CUDACC__", "    if (rl) {"]
    c += [f"        {gate_update(st)}" for st in states if st in gates]
    c.append("        if (rl == 2) {")
    c += [f"            const double {name} = {cw.ex(e)};" for name, e in code[cw][1]["temps"]]
    for item in code[cw][1]["states"]:
        c += ["            {", *grl_update(*item, "                "), "            }"]
    c.append("        } else {")
    c += [f"            out[{sidx[st]}] = {names.ident[st]} + dt * d_{sidx[st]};" for st in states if st not in gates]
    c += ["        }", "    }", "#endif"]
    c.append("    if (!rl) {")
    c += [f"        out[{i}] = d_{i};" for i in range(n_s)]
    c += ["    }", "}", "",
          f"CS_FN void {kname}_rhs(const double *y, double *dydt, double i_stim CS_PARAM_ARG)",
          f"{{\n    {kname}_step_(y, dydt, i_stim, 0.0, 0, &CS_PARAM(0));\n}}", "",
          f"CS_FN void {kname}_rush_larsen(double *y, double dt, double i_stim CS_PARAM_ARG)",
          f"{{\n    {kname}_step_(y, y, i_stim, dt, 1, &CS_PARAM(0));\n}}", "",
          f"CS_FN void {kname}_grl1(double *y, double dt, double i_stim CS_PARAM_ARG)",
          f"{{\n    {kname}_step_(y, y, i_stim, dt, 2, &CS_PARAM(0));\n}}", f"#endif /* CARDIOSIM_{up}_H */", ""]

    at = next(i for i, line in enumerate(c) if line.startswith(f"CS_FN void {kname}_step_("))
    grl = ["/* GRL1's update of a state y with dy/dt = f and a = ∂f/∂y: y + f·(e^(a·dt) − 1)/a, Forward Euler where",
           " * |a·dt| is below 1e-8 (the same to that order; no 0/0) */",
           f"CS_FN double {kname}_grl_(double y, double f, double a, double dt)",
           "{", "    const double h = a * dt;", "    return fabs(h) > 1e-8 ? y + f * (expm1(h) / a) : y + dt * f;",
           "}", ""]
    c[at:at] = _pow_helpers(kname, cw.used) + ([""] if cw.used else []) + grl

    py = [f"# generated by cardiosim/cells/cellml.py (generator {generator}) from {origin}; do not edit",
          "import numpy", "", "",
          "def _grl(y, f, a, dt):",
          "    \"\"\"GRL1's update (as <kname>_grl_ in the C header).\"\"\"",
          "    h = a * dt",
          "    return numpy.where(numpy.abs(h) > 1e-8, y + f * (numpy.expm1(h) / a), y + dt * f)", "", "",
          "def derived(c):",
          "    \"\"\"c: the parameter vector, its derived slots filled in place.\"\"\""]
    for x in derived:
        py.append(f"    c[{pindex[x]}] = {pw.ex(x.rhs())}")
    py += ["", "", "def step(y, i_stim, c, out, dt, rl):", *prologue(pw, "    {} = {}")]
    py.append("    if rl:")
    for st in states:
        if st in gates:
            inf, rate = gate_parts(pw, st)
            py.append(f"        inf_ = {inf}")
            py.append(f"        out[{sidx[st]}] = inf_ + ({names.ident[st]} - inf_) * numpy.exp(-dt * {rate})")
    py.append("        if rl == 2:")
    py += [f"            {name} = {pw.ex(e)}" for name, e in code[pw][1]["temps"]]
    for st, partials, top in code[pw][1]["states"]:
        py += [f"            {name} = {pw.ex(e)}" for name, e in partials]
        py.append(f"            out[{sidx[st]}] = _grl({names.ident[st]}, d_{sidx[st]}, {pw.ex(top)}, dt)")
    py.append("        else:")
    py += [f"            out[{sidx[st]}] = {names.ident[st]} + dt * d_{sidx[st]}" for st in states if st not in gates]
    py += ["            pass"] if all(st in gates for st in states) else []
    py.append("    if not rl:")
    py += [f"        out[{i}] = d_{i}" for i in range(n_s)]
    # every intermediate by its user-facing name, vectorised over cells (or over the samples of a trace): what
    # `cardiosim cell --trace` records besides the states (currents, fluxes, ...)
    py += ["", "", "def values(y, i_stim, c):",
           "    \"\"\"{name: value} of every state and intermediate (user names) at the states y.\"\"\"",
           *prologue(pw, "    {} = {}")]
    py.append("    return {")
    py += [f"        {names.user[x]!r}: {names.ident[x]}," for x in body if not x.is_state()]
    py += [f"        {names.user[s_]!r}: {names.ident[s_]}," for s_ in states]
    py += ["    }", ""]

    return {"c_header": "\n".join(c), "numpy_source": "\n".join(py), "names": names, "states": states,
            "literals": literals, "derived": derived, "gates": gates}
