"""What every command of the ``cardiosim`` command line shares: the parser class, the one error path and its exit
statuses, the PETSc start of the commands that use it.

How a verb module is started is its ``START`` (see :mod:`cardiosim.cli`):

RAW    ``main(words)``: the words after the verb, before anything else; the verb parses them itself (``bench``,
       ``sweep``: they start their runs as children, under mpirun, so this process must not be an MPI process).
LOCAL  ``main(args)``: parsed, without MPI (``args.comm`` is None): h5py, NumPy, matplotlib, so the command runs
       anywhere (a login node, a laptop) and while a run is still writing (``inspect``, ``plot``, ``model``,
       ``geometry``, ``info``).
MPI    ``main(args)``: parsed, in an MPI process (``args.comm``: MPI's world); the verb starts PETSc itself
       (:func:`start_petsc`).

A verb's module-level imports are the standard library's and cardiosim's own light modules only: the parser
imports every verb module, and ``cardiosim inspect``/``plot``/``--help`` must not load MPI or PETSc, nor ``cardiosim
run`` NumPy before its signal handler; what a command needs it imports in its ``main``.
"""

from __future__ import annotations

import argparse
import sys
import traceback

from cardiosim.runtime import signals
from cardiosim.runtime.errors import SimulationError, UserError

RAW, LOCAL, MPI = "raw", "local", "mpi"

# Exit statuses: UserError.exit_status (2: bad input, one line, nothing written), SimulationError.exit_status (3:
# the run or a write went wrong, one line, output kept), cardiosim.output.checkpoint.STOPPED (75: stopped by a
# signal after a checkpoint), and these:
BUG = 1             # anything else: a traceback, and the whole MPI job taken down
INTERRUPTED = 130   # Ctrl-C where no checkpoint is asked for


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line (and only rank 0 says it)."""

    def error(self, message):
        raise UserError(f"{self.prog}: {message} (see {self.prog} --help)")


def start_signals(module) -> None:
    """The signals, before NumPy, MPI or PETSc load (``module``: the verb's, or None). Every command but the RAW
    ones: a write beyond the file-size limit fails with EFBIG, handled as a full disk is, instead of killing the
    process. A verb with ``STOP_SIGNALS`` (run, sweep) turns SIGTERM, SIGINT and SIGUSR1 into a flag from here on
    (cardiosim.runtime.signals), so a stop during the set-up is a checkpoint at the first step."""
    if module is None or module.START != RAW:
        signals.ignore_file_size_signal()
    if getattr(module, "STOP_SIGNALS", False):
        signals.catch()


def split_petsc(argv):
    """(cardiosim's words, PETSc's: everything after ``--``)."""
    if "--" in argv:
        i = argv.index("--")
        return argv[:i], argv[i + 1:]
    return argv, []


def no_petsc_options(command: str, petsc_args) -> None:
    """The words after ``--`` given to a verb that takes none (all but those with PETSC_OPTIONS): one line."""
    if petsc_args:
        raise UserError(f"cardiosim {command}: takes no PETSc options (given after --: {' '.join(petsc_args)}); "
                        f"they are for cardiosim run")


def start_petsc(args) -> None:
    """Before anything imports PETSc (cardiosim.api.start_petsc: our options, the user's after --); a PETSc option of
    the user's that nothing reads is an error."""
    from cardiosim import api   # lazy: the run's API; the commands without PETSc load none of it
    api.start_petsc(args.petsc_args, args.comm)


def guarded(command, comm) -> int:
    """The one error path of every command: a mistake in the input is one line and exit status 2 (UserError), a
    run or a write that went wrong one line and 3 (SimulationError), Ctrl-C one line and 130; anything else is a
    bug, reported with its traceback, and on several ranks it takes the whole job down (MPI_Abort): no rank is
    ever left waiting in a collective. ``comm``: MPI's world, or None for the commands that run without MPI."""
    size = comm.size if comm is not None else 1
    try:
        return command()
    except (UserError, SimulationError) as e:
        say(f"cardiosim: error: {e}", comm)
        return e.exit_status
    except SystemExit:
        raise
    except BrokenPipeError:                  # `cardiosim inspect FILE | head`: the reader has what it wanted
        import os
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:   # Ctrl-C where no checkpoint is asked for (checkpoint.on_signal = false, cell, ...)
        say("cardiosim: error: interrupted (SIGINT)", comm)
        if size > 1:            # a rank may be inside a collective: leave without MPI_Finalize's wait
            import os
            os._exit(INTERRUPTED)
        return INTERRUPTED
    except MemoryError:
        # What the estimates up front (cardiosim.runtime.resources) did not foresee: still one line, and the job ends.
        rank = f" on rank {comm.rank}" if size > 1 else ""
        sys.stderr.write(f"cardiosim: error: out of memory{rank}; use a coarser grid or fewer samples, or a "
                         f"host with more memory\n")
        abort(comm, BUG)
        return BUG
    except BaseException:
        # A bug, or an error on some ranks only: report it and take the whole job down, never hang.
        rank = f" on rank {comm.rank}" if comm is not None else ""
        sys.stderr.write(f"cardiosim: internal error{rank}:\n{traceback.format_exc()}")
        abort(comm, BUG)
        return BUG


def say(line: str, comm) -> None:
    """One line on stderr, from rank 0 only (every rank reaches the same conclusion for these errors)."""
    if comm is None or comm.rank == 0:
        print(line, file=sys.stderr, flush=True)


def abort(comm, status: int) -> None:
    sys.stderr.flush()
    if comm is not None and comm.size > 1:
        # The launcher forwards a rank's stderr through its own process, which MPI_Abort can end before the
        # report has gone through (seen once with MPICH): give it a moment, then take the job down.
        import time
        time.sleep(0.5)
        comm.Abort(status)
