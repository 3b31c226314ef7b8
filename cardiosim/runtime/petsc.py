"""PETSc's options database, kept honest: the user's options win, our defaults are there only while a solver is set
up, and an option the user gave that nothing read is an error.

- :func:`init` starts petsc4py with the options given after ``--`` and remembers their names.
- :func:`inserted` puts a solver's defaults (those the user has not set) into the global database for the duration
  of its set-up and takes them out again, so the database afterwards holds what the user gave and nothing of ours
  (as petsctools' ``OptionsManager.inserted_options`` does for Firedrake). ``setFromOptions()`` runs inside it, last,
  so the command line wins.
- :func:`check_unused` is called once everything that reads options has been set up, before any output is written:
  a misspelt ``-elliptic_pc_typo gamg`` is one line naming it, exit status 2, instead of a run with the default
  preconditioner.
"""

from __future__ import annotations

import os
import re
from contextlib import contextmanager

from cardiosim.runtime.errors import UserError
from cardiosim.runtime.info import petsc_has_cuda

_given: list[str] = []    # option names from the command line (after --), without the leading dash

# Options PETSc reads only after set-up, so they cannot have been used when check_unused runs: at PetscFinalize
# (logging, memory and option reports), and a solver's viewers and converged reason at the end of each solve (those
# only under one of the run's prefixes, so a misspelt prefix is still caught).
_AT_FINALIZE = re.compile(r"^(log_|malloc|memory_|options_|objects_)|^(info|history)$")
_AT_SOLVE = re.compile(r"(^|_)(view|converged_reason)(_|$)")
_NUMBER = re.compile(r"^-[0-9.]")


def init(args: list[str], ours: list[str] = ()) -> None:
    """Initialise petsc4py with the user's ``args`` (the options after ``--``) and cardiosim's own options ``ours``
    (which the user's may override); must run before anything imports PETSc. Only the user's are checked by
    :func:`check_unused`."""
    check_syntax(args)
    check_gpu_types(args)
    import petsc4py
    # PETSc's own report of unused options at exit is off: check_unused says it earlier, in one line, and an error
    # exit would otherwise end with PETSc's warning block.
    petsc4py.init(["cardiosim", "-options_left", "0", *ours, *args])
    _given[:] = option_names(args)


# Options whose last word says that they take a value (PETSc reads a missing one as "not given", so that
# ``-elliptic_ksp_max_it`` alone would silently keep the default). Flags (``-ksp_monitor``, ``-log_view``) may stand
# alone; an option not listed here is not checked for its value.
_TAKES_VALUE = re.compile(r"_(type|max_it|max_its|rtol|atol|divtol|dtol|levels|restart|select|sweeps|omega|"
                          r"factor_levels|eigenvalues|esteig|order|fill|shift|threshold|coarse_eq_limit|"
                          r"max_levels|agg_nsmooths|degree)$")


def check_syntax(args: list[str]) -> None:
    """The options after ``--`` as PETSc reads them, ``-name [value] ...``: a word that follows a value (or comes
    first) belongs to no option, and an option that takes a value (:data:`_TAKES_VALUE`) must have one. UserError,
    one line, before PETSc starts (where a stray word would stop PETSc's initialisation)."""
    previous = None          # the option the next word may be the value of
    for a in args:
        if a.startswith("-") and len(a) > 1 and not _NUMBER.match(a):
            if previous and _TAKES_VALUE.search(previous):
                _missing_value(previous)
            previous = a.lstrip("-")
        elif previous is None:
            raise UserError(f"PETSc options: '{a}' belongs to no option (after --, every word is an option -name or "
                            f"the value after one, e.g. -elliptic_pc_type gamg)")
        else:
            previous = None
    if previous and _TAKES_VALUE.search(previous):
        _missing_value(previous)


def _missing_value(name: str) -> None:
    raise UserError(f"PETSc option -{name}: needs a value (-{name} VALUE); without one PETSc would ignore it and "
                    f"keep the default")


# Vector and matrix types that live on a GPU (PETSc's CUDA, HIP and Kokkos back-ends).
_GPU_TYPE = re.compile(r"cuda|cusparse|hip|kokkos|viennacl", re.I)


def check_gpu_types(args: list[str]) -> None:
    """UserError, one line, where an option (after ``--`` or in PETSC_OPTIONS) asks for a GPU vector or matrix type
    and this PETSc was built without CUDA: found in petscconf.h before PETSc starts, instead of PETSc's "unknown
    type" traceback at the first vector."""
    words = [*args, *os.environ.get("PETSC_OPTIONS", "").split()]
    asked = [f"{name} {value}" for name, value in zip(words, words[1:])
             if name.startswith("-") and name.endswith(("vec_type", "mat_type")) and _GPU_TYPE.search(value)]
    if asked and not petsc_has_cuda():
        raise UserError(f"PETSc option {asked[0]}: this PETSc was built without CUDA; build one with "
                        f"`CARDIOSIM_GPU=1 make setup` (with CUDA's nvcc on PATH), set "
                        f"PETSC_DIR/PETSC_ARCH to a PETSc configured --with-cuda, or leave the option out to run on "
                        f"the CPU")


def option_names(args: list[str]) -> list[str]:
    """The option names in a PETSc argument list (``-name [value]``; a negative number is a value, not a name)."""
    return [a.lstrip("-") for a in args if a.startswith("-") and len(a) > 1 and not _NUMBER.match(a)]


@contextmanager
def inserted(prefix: str, defaults: dict):
    """``defaults`` (keys without the prefix) in the global options database while the block runs, except where the
    user has set the option; removed afterwards."""
    from petsc4py import PETSc
    opts = PETSc.Options()
    added = [k for k in defaults if not opts.hasName(prefix + k)]
    for k in added:
        opts.setValue(prefix + k, defaults[k])
    try:
        yield
    finally:
        for k in added:
            opts.delValue(prefix + k)


def unused(prefixes: tuple[str, ...]) -> list[str]:
    """The command-line options no PETSc object has read, less those read only after set-up; ``prefixes``: the
    option prefixes of this run's solvers."""
    from petsc4py import PETSc
    opts = PETSc.Options()

    def read_later(name):
        return bool(_AT_FINALIZE.search(name)) or (name.startswith(tuple(prefixes)) and bool(_AT_SOLVE.search(name)))
    return [n for n in dict.fromkeys(_given) if not read_later(n) and not opts.used(n)]


def check_unused(prefixes: tuple[str, ...]) -> None:
    """UserError naming every command-line option that nothing used; ``prefixes`` (the solvers' option prefixes)
    are named in the message, so a misspelt prefix is easy to see."""
    left = unused(prefixes)
    if left:
        known = ", ".join(f"-{p}*" for p in prefixes)
        raise UserError(f"PETSc option{'s' if len(left) > 1 else ''} {', '.join('-' + n for n in left)} "
                        f"{'were' if len(left) > 1 else 'was'} not used by any solver (misspelt? this run's solvers "
                        f"read {known}; -help lists what each accepts)")
