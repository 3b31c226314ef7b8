"""Common subexpressions and one reciprocal per repeated divisor, on Myokit's expression trees, for the generated cell
code (cardiosim/cells/cellml_codegen.py).

Why our own pass: Myokit 1.39 has no common-subexpression elimination, and sympy's ``cse`` would first turn Myokit's
expressions into sympy's canonical form (terms reordered, quotients as negative powers, constants merged), which
changes every rounding and makes the C no longer comparable with the file's equations line by line. This pass keeps
each expression as Myokit wrote it and only

* **hoists a repeated subexpression** that contains a costly operation (a division, a power, a function call:
  exp, log, sqrt, ...) into a temporary evaluated once. Values are unchanged, bit for bit. It matters most on the
  CPU, where gcc may not merge two calls of exp() (they may set errno; cardiosim compiles without -ffast-math), and
  in GRL1's diagonal Jacobian, whose chain rule repeats the model's own exponentials many times;
* **reuses what the prologue computed**: a subexpression of GRL1's Jacobian equal to an intermediate's right-hand
  side is that intermediate (Myokit's derivative of exp(u) writes exp(u) again);
* **divides by a repeated divisor once**: x/b and y/b become x·r and y·r with r = 1/b, one division instead of
  several (a division costs a Newton–Raphson sequence on a GPU, several products' latency on a CPU), and x/c by a
  constant c (numbers and parameters, literals once the header is specialised) becomes x·(1/c), 1/c computed by
  the compiler. This changes the rounding of those quotients by up to an ulp, within the twins' round-off
  tolerance (tests/test_cellml.py); the NumPy twin does not do it.

The pass works on a *scope*: an ordered list of assignments (name, expression). Temporaries are defined just before
the first assignment that needs them (:func:`eliminate`), or all at the scope's start (``hoist_to_top``: GRL1's block,
whose assignments sit in one block per state). A temporary used only once is written back in place.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _myokit():
    import myokit
    return myokit


class Keys:
    """A structural key per node (type and operands, numbers by their exact bits), memoised by node identity: what
    Myokit's code() says, without its cost on deep trees."""

    def __init__(self):
        self._memo: dict[int, tuple] = {}
        self._alive: list = []                      # keeps the keyed nodes alive, so that ids are not reused

    def __call__(self, e) -> tuple:
        k = self._memo.get(id(e))
        if k is None:
            m = _myokit()
            if isinstance(e, m.Number):
                k = ("#", float(e.eval()).hex())
            elif isinstance(e, m.Name):
                v = e.var()
                k = ("$", v if isinstance(v, str) else v.qname())
            else:
                k = (type(e).__name__,) + tuple(self(x) for x in e)
            self._memo[id(e)] = k
            self._alive.append(e)
        return k


def _leaf(e) -> bool:
    """A node that names a value: a number, a variable, a derivative dot(x) or GRL1's ∂x/∂s (left as it is)."""
    m = _myokit()
    return isinstance(e, (m.Number, m.Name, m.Derivative, m.PartialDerivative))


def _rebuild(e, children):
    """``e`` with new operands (the same object where none changed)."""
    if all(a is b for a, b in zip(children, e)):
        return e
    return type(e)(*children)


def _always(e) -> range | tuple:
    """The operands of ``e`` that are evaluated whenever ``e`` is. A conditional evaluates one branch in C, so
    nothing inside its branches is hoisted out (TT06's gates: an exp of the branch not taken would cost what the
    condition saves), except the last branch of a removable-singularity guard (cardiosim/cells/singularities.py:
    ``if(|V − V0| < w, line, f)``), which is f itself, taken but within w of V0: O'Hara–Rudy's I_CaL, I_CaNa and
    I_CaK share their exponentials there."""
    m = _myokit()
    if isinstance(e, m.If):
        c = e[0]
        guard = (isinstance(c, m.Less) and isinstance(c[0], m.Abs) and isinstance(c[0][0], m.Minus)
                 and isinstance(c[0][0][1], m.Number) and isinstance(c[1], m.Number))
        return (2,) if guard else ()
    if isinstance(e, m.Piecewise):
        return ()
    return range(len(list(e)))


def _contains(e, kinds) -> bool:
    return isinstance(e, kinds) or any(_contains(x, kinds) for x in e)


@dataclass
class Scope:
    """The outcome of :func:`eliminate`: ``assignments`` in order, its temporaries (named by ``new_name``) included;
    ``defined``: key of an original subexpression -> the Name that holds its value (for a later scope's ``known``)."""

    assignments: list = field(default_factory=list)
    defined: dict = field(default_factory=dict)


def reciprocals(exprs, keys: Keys, extra_divisors=(), constant=None) -> list:
    """``exprs`` with x/b written x·(1/b) wherever the divisor b occurs in two or more quotients of ``exprs`` (or is
    in ``extra_divisors``, keys of divisors a previous scope already inverted); the 1/b are then common
    subexpressions that :func:`eliminate` computes once. Where ``constant(b)`` says b is made of constants only
    (numbers and parameters, folded into literals when the header is specialised), x/b is x·(1/b) even once: the
    compiler computes 1/b, and a product replaces a division."""
    m = _myokit()
    constant = constant or (lambda e: False)
    count: dict = {}

    def scan(e):
        if isinstance(e, m.Divide) and not _is_one(e[0]):
            count[keys(e[1])] = count.get(keys(e[1]), 0) + 1
        ops = list(e)
        for i in _always(e):
            scan(ops[i])
    for e in exprs:
        scan(e)
    repeated = {k for k, n in count.items() if n >= 2} | set(extra_divisors)

    def rewrite(e, branch=False):
        """In a conditional's branch (``branch``) only the quotients by constants: nothing is hoisted from there."""
        if _leaf(e):
            return e
        always = _always(e)
        kids = [rewrite(x, branch or i not in always) for i, x in enumerate(e)]
        if isinstance(e, m.Divide) and not _is_one(e[0]) and (constant(e[1]) or not branch
                                                               and keys(e[1]) in repeated):
            return m.Multiply(kids[0], m.Divide(m.Number(1.0), kids[1]))
        return _rebuild(e, kids)
    return [rewrite(e) for e in exprs]


def split_logs(exprs, constant) -> list:
    """``exprs`` with log(a/b) written log(a) − log(b) where a or b is a constant (numbers and parameters): the
    Nernst potentials' log(c_o/c_i) without their division (log(c_o) is folded once specialised). Round-off only
    (an absolute error of an ulp of log(c_o), not a relative one of the quotient); C only."""
    m = _myokit()

    def rewrite(e):
        if _leaf(e):
            return e
        kids = [rewrite(x) for x in e]
        if isinstance(e, m.Log) and len(kids) == 1 and isinstance(kids[0], m.Divide):
            a, b = kids[0][0], kids[0][1]
            if (constant(a) or constant(b)) and not (constant(a) and constant(b)):
                return m.Minus(m.Log(a), m.Log(b))
        return _rebuild(e, kids)
    return [rewrite(e) for e in exprs]


def _is_one(e) -> bool:
    m = _myokit()
    return isinstance(e, m.Number) and e.eval() == 1.0


def substitute(e, keys: Keys, known: dict):
    """``e`` with every subexpression whose key is in ``known`` replaced by its Name (outermost first)."""
    k = keys(e)
    if k in known:
        return known[k]
    return e if _leaf(e) else _rebuild(e, [substitute(x, keys, known) for x in e])


def eliminate(assignments, keys: Keys, new_name, known=None, hoist_to_top=False, private=None, later=()) -> Scope:
    """Common subexpressions of ``assignments`` [(lhs, expression)] computed once.

    ``new_name()``: a fresh temporary's name (a string). ``known``: {key: Name} of values computed before this scope
    (a subexpression with that key is replaced by the Name). ``private``: node classes a subexpression must not
    contain to be hoisted (GRL1's per-state ∂x/∂s names, which differ from block to block). ``later``: expressions
    of a later scope that will take this one's temporaries as ``known``: a subexpression that occurs here once and
    there again is held in a temporary too. Returns a :class:`Scope`."""
    m = _myokit()
    known = dict(known or {})
    count: dict = {}

    def scan(e, tally):
        k = keys(e)
        if k in known:
            return
        tally[k] = tally.get(k, 0) + 1
        if tally[k] == 1 and not _leaf(e):          # a repeat's operands are counted once, with the first
            ops = list(e)
            for i in _always(e):
                scan(ops[i], tally)
    for _, e in assignments:
        scan(e, count)
    there: dict = {}
    for e in later:
        scan(e, there)
    for k, n in there.items():
        if k in count:
            count[k] += n

    def worth(e) -> bool:
        if _leaf(e) or isinstance(e, m.Condition) or count.get(keys(e), 0) < 2:
            return False
        if private is not None and _contains(e, private):
            return False
        return _contains(e, (m.Divide, m.Power, m.Log, m.UnaryNumericalFunction))

    out: list = []
    temps: list = []                                # (name, expression) in the order defined
    defined: dict = {}
    uses: dict = {}

    def rewrite(e, pending, branch=False):
        k = keys(e)
        if k in known:
            return known[k]
        if k in defined:
            uses[defined[k].var()] += 1
            return defined[k]
        if _leaf(e):
            return e
        always = _always(e)
        kids = [rewrite(x, pending, branch or i not in always) for i, x in enumerate(e)]
        new = _rebuild(e, kids)
        if not branch and worth(e):
            name = new_name()
            pending.append((name, new))
            defined[k] = m.Name(name)
            uses[name] = 1
            return defined[k]
        return new

    for lhs, e in assignments:
        pending: list = []
        new = rewrite(e, pending)
        temps.extend(pending)
        if hoist_to_top:
            out.append((lhs, new))
        else:
            out.extend(pending)
            out.append((lhs, new))
    if hoist_to_top:
        out = temps + out
    # A temporary used once (its only repeat sat inside another temporary's expression) is written back in place.
    wanted_later = {defined[k].var() for k in there if k in defined}
    single = {name: expr for name, expr in temps if uses[name] <= 1 and name not in wanted_later}
    if single:
        def inline(e):
            if isinstance(e, m.Name) and isinstance(e.var(), str) and e.var() in single:
                return inline(single[e.var()])
            return e if _leaf(e) else _rebuild(e, [inline(x) for x in e])
        out = [(lhs, inline(e)) for lhs, e in out if lhs not in single]
        defined = {k: v for k, v in defined.items() if v.var() not in single}
    return Scope(out, defined)


# -- exponentials of the membrane potential ---------------------------------------------------------------------------
@dataclass
class _Mono:
    """A constant factor k·Πnum/Πden: k a number, num and den constant expressions (parameters, ...)."""

    k: float
    num: tuple = ()
    den: tuple = ()

    def times(self, e, keys: Keys, divide=False) -> "_Mono":
        m = _myokit()
        if isinstance(e, m.Number):
            x = float(e.eval())
            return _Mono(self.k / x if divide else self.k * x, self.num, self.den)
        if divide:
            return _Mono(self.k, self.num, self.den + (e,))
        return _Mono(self.k, self.num + (e,), self.den)

    def family(self, keys: Keys) -> tuple:
        return (tuple(sorted(keys(x) for x in self.num)), tuple(sorted(keys(x) for x in self.den)))


def _affine(e, v, constant, keys: Keys):
    """(A, b) with e = A·V + b, A a :class:`_Mono` (None where e does not depend on V) and b a constant expression
    (None for zero); None where e is not of that form."""
    m = _myokit()
    if isinstance(e, m.Name) and e.var() is v:
        return _Mono(1.0), None
    if constant(e):
        return None, e
    if isinstance(e, m.PrefixPlus):
        return _affine(e[0], v, constant, keys)
    if isinstance(e, m.PrefixMinus):
        r = _affine(e[0], v, constant, keys)
        if r is None:
            return None
        a, b = r
        return (None if a is None else _Mono(-a.k, a.num, a.den)), (None if b is None else m.PrefixMinus(b))
    if isinstance(e, (m.Plus, m.Minus)):
        x, y = _affine(e[0], v, constant, keys), _affine(e[1], v, constant, keys)
        if x is None or y is None or (x[0] is not None and y[0] is not None):
            return None
        minus = isinstance(e, m.Minus)
        a = x[0] if x[0] is not None else (None if y[0] is None else
                                            _Mono(-y[0].k if minus else y[0].k, y[0].num, y[0].den))
        bx, by = x[1], y[1]
        if by is None:
            b = bx
        elif bx is None:
            b = m.PrefixMinus(by) if minus else by
        else:
            b = type(e)(bx, by)
        return a, b
    if isinstance(e, m.Multiply):
        x, y = e[0], e[1]
        if constant(x):
            r, c = _affine(y, v, constant, keys), x
        elif constant(y):
            r, c = _affine(x, v, constant, keys), y
        else:
            return None
        if r is None:
            return None
        a, b = r
        return (None if a is None else a.times(c, keys)), (None if b is None else m.Multiply(b, c) if c is y
                                                            else m.Multiply(c, b))
    if isinstance(e, m.Divide) and constant(e[1]):
        r = _affine(e[0], v, constant, keys)
        if r is None:
            return None
        a, b = r
        return (None if a is None else a.times(e[1], keys, divide=True)), (None if b is None
                                                                            else m.Divide(b, e[1]))
    return None


_POWERS = (1, -1, 2, -2, 3, -3, 4, -4)


def shared_exponentials(exprs, v, constant, keys: Keys, value=None, v_max: float = 200.0) -> list:
    """``exprs`` with every exponential of an affine function of the membrane potential ``v``, exp(a·V + b) with a and
    b constants (numbers and parameters), written exp(b)·E^n with E = exp(a₀·V) one per family of scales a = n·a₀
    (n = ±1, ±2, ±3, ±4; a₀ the same product of parameters times a number): TT06's V/5, V/10 and V/20 exponentials
    of several gates, ±V/7, the pumps' ±F·V/RT, become a few exponentials, a few products and one reciprocal each
    (the FP64 cost of an exp is that of some twenty products). exp(b) and a₀ are constants the compiler folds once
    the header is specialised. The value changes by round-off only (exp(b)·exp(a·V) against exp(a·V + b));
    ``value(e)``, the number of a constant expression at the file's parameters, keeps out the exponentials for which
    the split could overflow where the original does not (|a·V| or |b| beyond 300 for |V| ≤ ``v_max``)."""
    m = _myokit()
    found = []                                  # (node, A, b)

    def scan(e):
        if isinstance(e, m.Exp):
            r = _affine(e[0], v, constant, keys)
            if r is not None and r[0] is not None and r[0].k != 0.0:     # 0·V (a file's own zero factor): no V
                a, b = r
                try:
                    ok = value is None or (abs(value(_mono_expr(a))) * v_max <= 300.0
                                           and (b is None or abs(value(b)) <= 300.0))
                except Exception:
                    ok = False
                if ok:
                    found.append((e, a, b))
                    return
        if not _leaf(e):
            for x in e:
                scan(x)
    for e in exprs:
        scan(e)
    if not found:
        return list(exprs)
    # families: the same symbolic factor; bases by increasing |k|, each scale an n-th multiple of a base
    bases: dict = {}                            # family -> [(k0, E node)]
    plan: dict = {}                             # id(node) -> (E node, n, b)
    for e, a, b in sorted(found, key=lambda t: abs(t[1].k)):
        fam = a.family(keys)
        entry = None
        for k0, node in bases.get(fam, []):
            n = a.k / k0
            r = round(n)
            if r in _POWERS and abs(n - r) <= 1e-12 * abs(n):
                entry = (node, r)
                break
        if entry is None:
            node = m.Exp(m.Multiply(_mono_expr(a), m.Name(v)) if (a.k != 1.0 or a.num or a.den) else m.Name(v))
            bases.setdefault(fam, []).append((a.k, node))
            entry = (node, 1)
        plan[id(e)] = (*entry, b)

    uses: dict = {}
    for node, n, b in plan.values():
        uses[id(node)] = uses.get(id(node), 0) + 1
    # an exponential alone in its family stays as it was: the split gains nothing and can only lose accuracy
    plan = {k: p for k, p in plan.items() if uses[id(p[0])] > 1}

    def power(node, n):
        p = node
        if abs(n) == 2:
            p = m.Multiply(node, node)
        elif abs(n) == 3:
            p = m.Multiply(m.Multiply(node, node), node)
        elif abs(n) == 4:
            sq = m.Multiply(node, node)
            p = m.Multiply(sq, sq)
        return p if n > 0 else m.Divide(m.Number(1.0), p)

    def rewrite(e):
        if id(e) in plan:
            node, n, b = plan[id(e)]
            p = power(node, n)
            return p if b is None else m.Multiply(m.Exp(b), p)
        return e if _leaf(e) else _rebuild(e, [rewrite(x) for x in e])
    return [rewrite(e) for e in exprs]


def _mono_expr(a: _Mono):
    """k·Πnum/Πden as a Myokit expression, the number first (constants left to right: the compiler folds them)."""
    m = _myokit()
    e = m.Number(a.k)
    for x in a.num:
        e = m.Multiply(e, x)
    for x in a.den:
        e = m.Divide(e, x)
    return e


# -- quotients merged -------------------------------------------------------------------------------------------------
class _Abandon(Exception):
    pass


_RATIONAL = ("Plus", "Minus", "Multiply", "Divide", "PrefixMinus", "PrefixPlus")


def _steep(e) -> bool:
    """Whether ``e`` holds an exponential of a steep argument, one divided by a number under 0.5 (a smoothed switch:
    Livshitz–Rudy 2007's 1 − 1/(1 + exp(−(V + 40)/0.024 mV)), Lindblad 1996's τ_s1 with exp((V + 32.8)/0.1 mV),
    O'Hara–Rudy's Ito development with /0.2154 mV; a gate's slope is a few mV). Such an exp overflows to inf a few mV (or 70 mV) from the
    switch, where 1 − 1/x is exactly 1 but the merged (x − 1)/x is inf/inf = NaN, and products of such factors
    overflow sooner: merge_quotients leaves these quotients as written (generator 5 broke both models' Forward
    Euler beat this way)."""
    m = _myokit()
    return any(isinstance(q[1], m.Number) and 0 < abs(float(q[1].eval())) < 0.5
               for ex in e.walk(m.Exp) for q in ex[0].walk(m.Divide))


def _exponent(e) -> float | None:
    """The exponent of the power ``e`` where it is a number, written n or −(n) (CellML's x^(−1) reaches Myokit as
    a power of the negated number 1: Bondarenko 2004's buffers (1 + k/(K + c)²)^(−1)); None otherwise."""
    m = _myokit()
    if not isinstance(e, m.Power):
        return None
    x = e[1]
    if isinstance(x, m.Number):
        return float(x.eval())
    if isinstance(x, m.PrefixMinus) and isinstance(x[0], m.Number):
        return -float(x[0].eval())
    return None


def merge_quotients(exprs, defs: dict, constant, keys: Keys, depth: int = 3, max_den: int = 4, keep=()) -> list:
    """``exprs`` with the quotients of each sum-and-product (a subtree of +, −, ·, /) put over one denominator where
    that divides fewer times, the intermediates' equations (``defs``, {variable: expression}) looked through where
    they are quotients themselves (up to ``depth`` levels): 1/(1 + c/x) becomes x/(x + c) (TT06's buffers, d∞,
    i_up), a/b + c/d (a·d + c·b)/(b·d) (β_m), (x∞ − x)/τ with τ = α·β + c or any ratio of sums of quotients
    (τ_Xs, τ_f, the K1 rectifier's α/(α + β)) x's rate without dividing by τ. Identical factors of the numerator
    and the denominator cancel; a division by a constant (numbers and parameters, literals once specialised) is not
    counted (the compiler's reciprocal). The merged form replaces the subtree only where it has fewer divisions than
    the subtree as written, or as few and it looked through an intermediate (whose own division is then unused
    where nothing else reads it: τ = α·β, the former flatten_quotients). At most ``max_den`` distinct factors that
    are not constants in a denominator, so that a product of sigmoids cannot overflow where the quotients did not.
    ``keep``: indices of ``exprs`` left as they are (the gates' steady states x∞: x∞ − x cancels near the steady
    state and magnifies x∞'s last bits, which should stay the NumPy twin's). Round-off only, the same algebra;
    C only."""
    m = _myokit()
    keep = set(keep)

    def is_one(e):
        return isinstance(e, m.Number) and e.eval() == 1.0

    def prod(items):
        out = None
        for x in items:
            if is_one(x):
                continue
            out = x if out is None else m.Multiply(out, x)
        return m.Number(1.0) if out is None else out

    def cancel(num, den):
        num, den = list(num), list(den)
        for x in list(den):
            k = keys(x)
            for i, y in enumerate(num):
                if keys(y) == k:
                    del num[i]
                    den.remove(x)
                    break
        return num, den

    def check(den):
        if len({keys(x) for x in den if not constant(x)}) > max_den:
            raise _Abandon()
        if any(_steep(x) for x in den if not constant(x)):
            raise _Abandon()
        return den

    state = {"expanded": False}

    def is_state(e):
        return isinstance(e, m.Name) and not isinstance(e.var(), str) and e.var().is_state()

    def frac(e, level, expand=True):
        """(numerator factors, denominator factors) of the rational subtree e; ``expand``: whether a name may be
        looked through."""
        name = type(e).__name__
        if constant(e) or _leaf(e) and not isinstance(e, m.Name):
            return [e], []
        if isinstance(e, m.Name):
            var = e.var()
            if (expand and var in defs and level < depth and not _contains(defs[var], (m.If, m.Piecewise))
                    and not _steep(defs[var])):
                n, d = frac(defs[var], level + 1)
                if any(not constant(x) for x in d):
                    state["expanded"] = True
                    return n, d
            return [e], []
        if name == "Multiply":
            (n1, d1), (n2, d2) = frac(e[0], level), frac(e[1], level)
            return cancel(n1 + n2, check(d1 + d2))
        if name == "Divide":
            (n1, d1), (n2, d2) = frac(e[0], level), frac(e[1], level)
            return cancel(n1 + d2, check(d1 + n2))
        if name in ("Plus", "Minus"):
            # x∞ − x of a gate: x∞ stays its own quotient, so that the difference, which cancels near the steady
            # state, is rounded as the NumPy twin rounds it (N∞ − x·D∞ would differ by an ulp of N∞ there)
            gate = is_state(e[0]) or is_state(e[1])
            (n1, d1), (n2, d2) = frac(e[0], level, not gate), frac(e[1], level, not gate)
            op = type(e)
            if not d1 and not d2:
                return [op(prod(n1), prod(n2))], []
            shared, r1 = [], []
            rest2 = list(d2)
            for x in d1:
                k = keys(x)
                j = next((i for i, y in enumerate(rest2) if keys(y) == k), None)
                if j is None:
                    r1.append(x)
                else:
                    shared.append(x)
                    del rest2[j]
            return [op(prod(n1 + rest2), prod(n2 + r1))], check(shared + r1 + rest2)
        if name == "PrefixMinus":
            n, d = frac(e[0], level)
            return [m.PrefixMinus(prod(n))], d
        if name == "PrefixPlus":
            return frac(e[0], level)
        p = _exponent(e)
        if p is not None:
            if p == int(p) and 1 <= abs(p) <= 4:
                n, d = frac(e[0], level)
                if any(not constant(x) for x in d) or p < 0:
                    pn = m.Power(prod(n), m.Number(abs(p))) if n else m.Number(1.0)
                    pd = m.Power(prod(d), m.Number(abs(p))) if d else None
                    num, den = [pn], ([pd] if pd is not None else [])
                    return (den, check(num)) if p < 0 else (num, check(den))
        return [inner(e)], []

    def divisions(e) -> int:
        """Non-constant divisions of the rational subtree e (not looking into names or functions)."""
        if _leaf(e) or constant(e):
            return 0
        name = type(e).__name__
        if name in _RATIONAL:
            here = 1 if name == "Divide" and not constant(e[1]) else 0
            return here + sum(divisions(x) for x in e)
        if (_exponent(e) or 0) < 0:
            return 1 + divisions(e[0])
        return 0

    def inner(e):
        """e with the rational subtrees below it rewritten (its own node kept)."""
        if _leaf(e):
            return e
        return _rebuild(e, [rewrite(x) for x in e])

    def rewrite(e):
        if _leaf(e) or constant(e):
            return e
        name = type(e).__name__
        if name in _RATIONAL or isinstance(e, m.Power):
            outer = state["expanded"]
            state["expanded"] = False
            try:
                n, d = frac(e, 0)
            except _Abandon:
                n = None
            expanded, state["expanded"] = state["expanded"], outer
            if n is not None:
                dn = [x for x in d if not constant(x)]
                merged = 1 if dn else 0
                before = divisions(e)
                if merged < before or (expanded and merged <= before and before > 0):
                    return m.Divide(prod(n), prod(d)) if d else prod(n)
            if name in _RATIONAL:
                return _rebuild(e, [rewrite(x) for x in e])
        return inner(e)
    return [e if i in keep else rewrite(e) for i, e in enumerate(exprs)]


# -- reciprocals shared by two divisors -------------------------------------------------------------------------------
def paired_reciprocals(exprs, defs: dict, v, constant, keys: Keys, lines: dict, keep=(), v_max: float = 200.0,
                       bound: float = 1e50) -> list:
    """``exprs`` with pairs of divisions by different functions of the membrane potential ``v`` alone, x/b₁ and
    y/b₂, written x·b₂·r and y·b₁·r with r = 1/(b₁·b₂): one division instead of two, for three products (an FP64
    division is some twenty instructions on a GPU, whose cell kernels are bound by the instructions they issue:
    Bondarenko's hand kernel does this for its α_Na1x, α/β of I_Kto,f, ...). A product of two denominators
    overflows where neither does, so only a divisor that stays within [1/``bound``, ``bound``] in magnitude for
    every |V| ≤ ``v_max`` (1 mV apart, at the file's parameters; the margin of 10⁵⁰ leaves room for overridden
    ones) is paired. Pairs are consecutive in the body's order, and b₂ may read only lines before b₁'s (``lines``:
    {variable: index of its line}; b₂ is evaluated where b₁ is). Divisions in ``keep`` (the gates' steady states),
    inside a conditional's branches, and divisors that occur more than once (:func:`reciprocals` shares those) are
    left as they are. Round-off only; C only."""
    m = _myokit()
    keep = set(keep)
    v_only: dict = {}

    def only_v(e) -> bool:
        """Whether ``e`` reads nothing but ``v``, constants and intermediates that do the same."""
        if constant(e):
            return True
        if isinstance(e, m.Name):
            var = e.var()
            if var is v:
                return True
            if isinstance(var, str) or var not in defs:
                return False
            if var not in v_only:
                v_only[var] = False                     # a cycle cannot happen in a sorted body; be safe
                v_only[var] = only_v(defs[var])
            return v_only[var]
        if _leaf(e):
            return False
        return all(only_v(x) for x in e)

    def inlined(e):
        if isinstance(e, m.Name) and not isinstance(e.var(), str) and e.var() in defs:
            return inlined(defs[e.var()])
        return e if _leaf(e) else _rebuild(e, [inlined(x) for x in e])

    def bounded(b) -> bool:
        import warnings
        f = inlined(b)
        with warnings.catch_warnings():                 # an exp overflowing here is an answer (no), not news
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                for k in range(-int(v_max), int(v_max) + 1):
                    x = abs(float(f.eval(subst={m.Name(v): m.Number(float(k))})))
                    if not (1.0 / bound <= x <= bound):
                        return False
            except Exception:                           # ZeroDivision, overflow: not bounded
                return False
        return True

    def reads(e) -> set:
        return {n.var() for n in e.walk(m.Name) if not isinstance(n.var(), str) and n.var() in defs}

    count: dict = {}
    found = []                                          # (line, division node) in the body's order

    def scan(e, line):
        if isinstance(e, m.Divide) and not constant(e[1]):
            count[keys(e[1])] = count.get(keys(e[1]), 0) + 1
            found.append((line, e))
        if not _leaf(e):
            ops = list(e)
            for i in _always(e):
                scan(ops[i], line)
    for line, e in enumerate(exprs):
        if line not in keep:
            scan(e, line)
    candidates = [(line, q) for line, q in found
                  if count[keys(q[1])] == 1 and not _steep(q[1]) and only_v(q[1]) and bounded(q[1])]
    plan: dict = {}
    i = 0
    while i + 1 < len(candidates):
        (l1, q1), (l2, q2) = candidates[i], candidates[i + 1]
        if all(lines.get(x, -1) < l1 for x in reads(q2[1])):
            b1, b2 = q1[1], q2[1]
            r = m.Divide(m.Number(1.0), m.Multiply(b1, b2))
            plan[id(q1)] = (q1[0], m.Multiply(b2, r))
            plan[id(q2)] = (q2[0], m.Multiply(b1, r))
            i += 2
        else:
            i += 1

    def rewrite(e):
        if id(e) in plan:
            x, inv = plan[id(e)]
            x = rewrite(x)
            return inv if _is_one(x) else m.Multiply(x, inv)
        return e if _leaf(e) else _rebuild(e, [rewrite(x) for x in e])
    return [rewrite(e) for e in exprs]
