"""The stop signals of a run (SIGTERM, SIGINT, SIGUSR1), caught from the first moment.

Only the standard library here: ``cardiosim run`` installs the handler before it imports NumPy, MPI or PETSc, so
that the window in which a signal still has its default effect is the interpreter's own start.
"""

import signal

# SIGINT is what Ctrl-C sends (and MPICH's mpirun forwards to every rank): the same as SIGTERM.
SIGNALS = (signal.SIGTERM, signal.SIGUSR1, signal.SIGINT)
received = []    # the stop signals this process has received (a handler may only append)


def flag(signum, frame):   # nothing else is safe here: the step boundary does the work
    received.append(signum)


def catch() -> None:
    """A stop signal only raises a flag; the first step's collective turns it into a checkpoint and exit status 75
    (cardiosim.output.checkpoint), and further signals (a second SIGTERM during the checkpoint) change nothing."""
    for s in SIGNALS:
        signal.signal(s, flag)


def ignore_file_size_signal() -> None:
    """A write beyond the file-size limit (``ulimit -f``, which batch systems impose) then fails with EFBIG, which
    every writer handles as a full disk is handled (one line, the file's status marked), instead of SIGXFSZ killing
    the process halfway through a write (which leaves a file HDF5 cannot open, or a core dump)."""
    if hasattr(signal, "SIGXFSZ"):
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
