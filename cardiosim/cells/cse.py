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

    def rewrite(e):
        if _leaf(e):
            return e
        always = _always(e)
        kids = [rewrite(x) if i in always else x for i, x in enumerate(e)]
        if isinstance(e, m.Divide) and not _is_one(e[0]) and (keys(e[1]) in repeated or constant(e[1])):
            return m.Multiply(kids[0], m.Divide(m.Number(1.0), kids[1]))
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
