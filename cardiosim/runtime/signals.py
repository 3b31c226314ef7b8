"""The stop signals (SIGTERM, SIGINT, SIGUSR1), caught from the first moment: the one stop path of ``cardiosim run``
and ``cardiosim sweep``.

Only the standard library here: both commands install the handler before they import NumPy, h5py, MPI or PETSc,
so that the window in which a signal still has its default effect is the interpreter's own start. A run turns the
flag into a checkpoint at its next step and exit status :data:`STOPPED` (cardiosim.output.checkpoint); a sweep
passes the signal on to the runs it has started (:func:`forward`), starts no other, waits for their checkpoints,
writes its table and exits with :data:`STOPPED` as well (cardiosim.simulation.sweep).
"""

import os
import signal
from contextlib import contextmanager

# SIGINT is what Ctrl-C sends (and MPICH's mpirun forwards to every rank): the same as SIGTERM.
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
STOPPED = 75     # exit status after a clean stop on a signal (sysexits EX_TEMPFAIL: "try again later")
received = []    # the stop signals this process has received (a handler may only append)


def flag(signum, frame):   # nothing else is safe here: the step boundary does the work
    received.append(signum)


def catch() -> None:
    """A stop signal only raises a flag; the first step's collective turns it into a checkpoint and exit status 75
    (cardiosim.output.checkpoint), and further signals (a second SIGTERM during the checkpoint) change nothing."""
    for s in SIGNALS:
        signal.signal(s, flag)


def name(signum: int) -> str:
    """SIGINT, SIGTERM, ..."""
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def forward(signum: int, pids) -> list[int]:
    """Pass a stop on to child processes (a sweep's runs, or their mpirun, which passes it to every rank): each
    stops at its next step with a checkpoint. Returns the pids it reached (a child that has just ended is not)."""
    reached = []
    for pid in pids:
        try:
            os.kill(pid, signum)
        except ProcessLookupError:
            continue
        reached.append(pid)
    return reached


def ignore_file_size_signal() -> None:
    """A write beyond the file-size limit (``ulimit -f``, which batch systems impose) then fails with EFBIG, which
    every writer handles as a full disk is handled (one line, the file's status marked), instead of SIGXFSZ killing
    the process halfway through a write (which leaves a file HDF5 cannot open, or a core dump)."""
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


class Deferred:
    """A Ctrl-C (SIGINT) held while :func:`deferred_interrupt` is in force: raised as KeyboardInterrupt where the
    caller asks (:meth:`check`), not wherever the interpreter happens to be."""

    def __init__(self):
        self.hit = False

    def check(self) -> None:
        if self.hit:
            raise KeyboardInterrupt


@contextmanager
def deferred_interrupt():
    """A :class:`Deferred` for the block. Why: a KeyboardInterrupt raised inside a library's C code that calls back
    into Python comes out as that library's own error (matplotlib's renderer, interrupted mid-draw: "ValueError:
    Invalid affine transformation matrix"), which would be reported as an internal error, not as Ctrl-C. Outside
    the main thread (where no handler can be set) the interrupt keeps its usual effect."""
    held = Deferred()
    try:
        previous = signal.signal(signal.SIGINT, lambda signum, frame: setattr(held, "hit", True))
    except ValueError:
        yield held
        return
    try:
        yield held
    finally:
        signal.signal(signal.SIGINT, previous)
