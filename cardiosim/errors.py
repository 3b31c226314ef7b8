"""The two kinds of failure a user sees.

UserError: the input is wrong (config, file, command line). One line, exit status 2, nothing written.
SimulationError: the run itself went wrong (a state left its range, a solver diverged). One line naming
where and when, exit status 3, output written so far kept.
Anything else is a bug: the traceback is printed and the whole MPI job is aborted.
"""


class UserError(ValueError):
    exit_status = 2


class SimulationError(RuntimeError):
    exit_status = 3


def io_reason(e: Exception) -> str:
    """One short line for a failed write: the OS's words where there is an errno (HDF5's own messages run over
    several lines)."""
    import os
    if getattr(e, "errno", None):
        return f"{os.strerror(e.errno)}, errno {e.errno}"
    text = str(e)
    if "errno = 28" in text or "No space left" in text:      # h5py reports a full disk without setting errno
        return "No space left on device"
    return text.splitlines()[0][:200] if text else type(e).__name__
