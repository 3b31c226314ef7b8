"""The CUDA kernel variants: the seed's optimisation study (docs/dev/design.md §5, Table 4.1) and the fused kernel.

Every variant is kernels/fused.cu compiled with a different combination of three switches, plus a launch policy. All
of them do the same arithmetic in the same order, so they give the same numbers (bit for bit on one GPU); they
differ only in how the code is organised, which is what the seed measured:

=================  ====================  ======================  ==========================  ===================
variant            locals                derivatives             parameters                  substeps per launch
=================  ====================  ======================  ==========================  ===================
original           one per intermediate  auxiliary global array  initialised declarations    1
lean-registers     small reused set      auxiliary global array  initialised declarations    1
no-aux             one per intermediate  registers               initialised declarations    1
constant-memory    one per intermediate  auxiliary global array  array uploaded per context  1
all                small reused set      registers               array uploaded per context  1
fused              small reused set      registers               array uploaded per context  k (state in registers)
=================  ====================  ======================  ==========================  ===================

- *Locals*: the model headers are written with a small set of block-scoped temporaries ("lean"). The seed's original
  declared one variable per intermediate quantity at the top of the kernel (154 of them for Bondarenko);
  :func:`hoist_locals` produces that form mechanically from the same header, so the arithmetic is unchanged.
- *Derivatives*: the original wrote dy/dt to an auxiliary vector in global memory and read it back for the update
  (2 x 41 global accesses per cell and step; the array is pitched like the state, so the accesses are coalesced, and
  volatile, so that the compiler keeps them as the seed's compiler did).
- *Parameters*: both forms live in ``__constant__`` memory. The original declares each one as an initialised
  ``__constant__ double`` (values fixed when the kernel is compiled, :func:`constant_declarations`); the optimised
  form is one array uploaded once per context, so that a parameter override needs no recompilation.
- *Substeps*: the seed launched one Forward-Euler step per kernel call; ``fused`` keeps the state in registers for
  all k substeps of a PDE step.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Variant:
    name: str
    hoisted_locals: bool       # one function-scope local per intermediate (the seed's original)
    aux: bool                  # derivatives through an auxiliary array in global memory
    initialised_params: bool   # parameters as initialised __constant__ declarations, fixed at compile time
    fused: bool                # k substeps per launch with the state in registers
    doc: str


VARIANTS = {v.name: v for v in (
    Variant("original", True, True, True, False,
            "the seed's kernel: one local per intermediate, auxiliary derivative array, initialised constants, "
            "one substep per launch"),
    Variant("lean-registers", False, True, True, False, "original with a small reused set of temporaries"),
    Variant("no-aux", True, False, True, False, "original with the derivatives kept in registers"),
    Variant("constant-memory", True, True, False, False,
            "original with the parameters in one __constant__ array uploaded once per context"),
    Variant("all", False, False, False, False, "the three optimisations together, one substep per launch"),
    Variant("fused", False, False, False, True, "all, plus k substeps per launch with the state in registers"),
)}

DEFAULT = "fused"
SEED_MODELS = ("bondarenko",)   # the seed's variants are built for its model; other models get the fused kernel


def get(name: str, model_kernel: str) -> Variant:
    """The variant called ``name`` for a model whose C kernel is ``model_kernel``; ValueError names what is allowed."""
    if name not in VARIANTS:
        raise ValueError(f"unknown kernel variant '{name}'; choose one of {', '.join(VARIANTS)}")
    if name != "fused" and model_kernel not in SEED_MODELS:
        raise ValueError(f"kernel variant '{name}' exists for {', '.join(SEED_MODELS)} only (the seed's study); "
                         f"use 'fused' for {model_kernel}")
    return VARIANTS[name]


# -- source generation ------------------------------------------------------------------------------------------------
def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _split_top(text: str, sep: str) -> list[str]:
    """Split at ``sep`` outside parentheses and brackets."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        if ch == sep and depth == 0:
            out.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    out.append("".join(cur))
    return out


_DECL = re.compile(r"^(const\s+)?double\s+(.*)$", re.S)
_NAME = re.compile(r"^\s*([A-Za-z_]\w*)\s*(=\s*(.*))?$", re.S)


def hoist_locals(header: str, function: str) -> str:
    """The header with ``function``'s body rewritten in the seed's style: every local ``double`` declared once at the
    top of the function, assigned where it was initialised. Same statements, same order, same arithmetic.

    Handles the forms the model headers use: ``const double a = e1, b = e2;``, ``double a, b;``, nested blocks,
    if/else. Refuses (ValueError) a name declared twice, since hoisting would then change its meaning."""
    m = re.search(r"\b" + re.escape(function) + r"\s*\(", header)
    if not m:
        raise ValueError(f"hoist_locals: no function {function} in the header")
    open_brace = header.index("{", m.end())
    depth, i = 0, open_brace
    while True:
        ch = header[i]
        depth += ch == "{"
        depth -= ch == "}"
        if depth == 0:
            break
        i += 1
    body = _strip_comments(header[open_brace + 1:i])

    names: list[str] = []
    out: list[str] = []
    stmt: list[str] = []
    paren = 0
    for ch in body:
        if ch in "{}" and paren == 0 and not "".join(stmt).strip():
            out.append(ch + "\n")
            stmt = []
            continue
        stmt.append(ch)
        paren += (ch == "(") - (ch == ")")
        if ch == ";" and paren == 0:
            text = "".join(stmt).strip()[:-1].strip()
            stmt = []
            d = _DECL.match(text)
            if not d:
                out.append(text + ";\n")
                continue
            for decl in _split_top(d.group(2), ","):
                n = _NAME.match(decl)
                if not n:
                    raise ValueError(f"hoist_locals: cannot parse declaration '{decl.strip()}' in {function}")
                name = n.group(1)
                if name in names:
                    raise ValueError(f"hoist_locals: {name} is declared twice in {function}")
                names.append(name)
                if n.group(2):
                    out.append(f"{name} = {' '.join(n.group(3).split())};\n")
    if "".join(stmt).strip():
        raise ValueError(f"hoist_locals: unterminated statement at the end of {function}")
    decls = "".join(f"    double {', '.join(names[j:j + 8])};\n" for j in range(0, len(names), 8))
    new_body = ("\n    /* generated by cardiosim/reaction/ode/kernel_variants.py: the seed's style, one local per "
                f"intermediate ({len(names)}) */\n" + decls + "".join("    " + line for line in out))
    return header[:open_brace + 1] + new_body + header[i:]


def _param_enum(header: str, n_params: int) -> list[str]:
    """The parameter index names of a model header: the enum with ``n_params`` entries before its *_COUNT_."""
    for block in re.findall(r"enum\s*\{(.*?)\}", _strip_comments(header), flags=re.S):
        names = [x.strip() for x in block.split(",") if x.strip()]
        if names and names[-1].endswith("_COUNT_") and len(names) - 1 == n_params:
            return names[:-1]
    raise ValueError(f"no enum of {n_params} parameter names in the model header")


def constant_declarations(header: str, values) -> str:
    """One initialised ``__constant__ double c_<INDEX NAME> = value;`` per parameter (the seed's form); hexadecimal
    literals, so the values are exactly those of the parameter vector."""
    names = _param_enum(header, len(values))
    return "".join(f"__constant__ double c_{n} = {float(v).hex()}; /* {float(v)!r} */\n"
                   for n, v in zip(names, values))


INCLUDE_LINE = "#include CS_STR(CS_MODEL.h)"


def source(fused_cu: str, header: str, model_kernel: str, params, variant: Variant) -> tuple[str, list[str]]:
    """(source text, nvcc -D options) of ``variant`` for the model whose header text is ``header``."""
    defines = [f"-DCS_AUX={int(variant.aux)}", f"-DCS_PARAMS_INITIALISED={int(variant.initialised_params)}"]
    src = fused_cu
    if variant.hoisted_locals:
        if INCLUDE_LINE not in src:
            raise RuntimeError(f"kernels/fused.cu no longer has the line '{INCLUDE_LINE}' that variants replace")
        src = src.replace(INCLUDE_LINE, hoist_locals(header, f"{model_kernel}_rhs"))
    if variant.initialised_params:
        src = constant_declarations(header, params) + src
    return f"// kernel variant: {variant.name}\n" + src, defines
