"""Removable singularities of a cell model's equations, found and guarded (cardiosim/cells/cellml.py uses it).

A quotient such as (V − V0)·g/(exp(a(V − V0)) − 1) is 0/0 at V = V0 and loses its digits near it. Where the
denominator of a V-dependent quotient changes sign at a V0 at which the numerator vanishes too (found numerically, on
a 0.1 mV grid from −150 to 100 mV refined by bisection, with the parameters at their defaults and the other states at
their initial values), the equation is replaced within WIDTH mV of V0 by the straight line through its values at
V0 ± WIDTH: the remedy of Chaste's code generator, exact to O(WIDTH²). A parameter that moves V0 leaves the guard
where it was; a point this search misses can be fixed with a patch (cellml.load_myokit).
"""

from __future__ import annotations

import numpy as np

WIDTH = 1e-5          # mV: half-width of the interval around a removable singularity that is interpolated


def guard(m, v) -> list[tuple[str, float]]:
    """Replace, in the Myokit model ``m``, each equation that is 0/0 at a single value V0 of the membrane potential
    ``v`` by the straight line through its values WIDTH mV either side, within WIDTH of V0; returns
    [(variable qname, V0)]."""
    import myokit
    found = []
    consts = {x: x.eval() for x in m.variables(deep=True) if x.is_constant()}
    states = {x: x.initial_value(True) for x in m.states()}
    grid = np.linspace(-150.0, 100.0, 2501) + 0.0123456789     # off the round numbers where V0 usually lies
    for x in list(m.variables(deep=True)):
        if x.is_constant() or x.is_state() or x.binding() is not None or x.rhs() is None:
            continue
        rhs = x.rhs()
        if not any(isinstance(e, myokit.Divide) for e in rhs.walk()):
            continue
        points = set()
        for e in rhs.walk():
            if not isinstance(e, myokit.Divide):
                continue
            den, num = e[1], e[0]
            fden = _as_function_of_v(den, v, consts, states)
            fnum = _as_function_of_v(num, v, consts, states)
            if fden is None or fnum is None:
                continue
            d = np.broadcast_to(fden(grid), grid.shape)
            for i in np.nonzero(np.sign(d[:-1]) * np.sign(d[1:]) < 0)[0]:
                a, b = grid[i], grid[i + 1]
                for _ in range(80):
                    c = 0.5 * (a + b)
                    if np.sign(fden(c)) == np.sign(fden(a)):
                        a = c
                    else:
                        b = c
                v0 = 0.5 * (a + b)
                scale = max(abs(fnum(v0 - 1.0)), abs(fnum(v0 + 1.0)), 1e-300)
                if abs(fnum(v0)) <= 1e-6 * scale:
                    points.add(round(v0, 9))
        if points:
            # V may enter through intermediates (O'Hara-Rudy's vfrt): the edge values need them expanded
            keep = [y for y in m.variables(deep=True) if y.is_state() or y.is_constant() or y.binding() is not None]
            full = rhs.clone(expand=True, retain=keep)
        for v0 in sorted(points):
            lo, hi = myokit.Number(v0 - WIDTH), myokit.Number(v0 + WIDTH)
            f_lo = full.clone(subst={myokit.Name(v): lo})
            f_hi = full.clone(subst={myokit.Name(v): hi})
            line = myokit.Plus(f_lo, myokit.Multiply(
                myokit.Divide(myokit.Minus(myokit.Name(v), lo), myokit.Number(2 * WIDTH)),
                myokit.Minus(f_hi, f_lo)))
            near = myokit.Less(myokit.Abs(myokit.Minus(myokit.Name(v), myokit.Number(v0))),
                               myokit.Number(WIDTH))
            rhs = myokit.If(near, line, rhs)
            found.append((x.qname(), v0))
        if points:
            x.set_rhs(rhs)
    return found


def _as_function_of_v(expr, v, consts, states):
    """expr as a Python function of V alone (constants at their values, other states at their initial values),
    or None where it depends on anything else."""
    import myokit
    try:
        e = expr.clone(expand=True, retain=[x for x in states] + list(consts))
    except Exception:
        return None
    subst = {}
    for n in e.walk():
        if isinstance(n, myokit.Name):
            var = n.var()
            if var is v:
                continue
            if var in consts:
                subst[n] = myokit.Number(consts[var])
            elif var in states:
                subst[n] = myokit.Number(states[var])
            else:
                return None
    if not any(isinstance(n, myokit.Name) and n.var() is v for n in e.walk()):
        return None
    from myokit.formats.python import NumPyExpressionWriter
    w = NumPyExpressionWriter()
    w.set_lhs_function(lambda lhs: "V")
    f = eval("lambda V: " + w.ex(e.clone(subst=subst)), {"numpy": np})

    def safe(x):
        with np.errstate(all="ignore"):
            return f(np.asarray(x, dtype=float))
    return safe
