"""The two kinds of failure a user sees.

UserError: the input is wrong (config, file, command line). One line, exit status 2, nothing written.
SimulationError: the run itself went wrong (a state left its range, a solver diverged, a file could not be
written: a full disk, a file-size limit). One line naming where and when, exit status 3, output written so far
kept and marked.
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
    import re
    text = str(e)
    # h5py reports a full disk (ENOSPC) or a file-size limit (EFBIG) in HDF5's words, without setting errno.
    found = re.search(r"errno = (\d+)", text)
    if found:
        return f"{os.strerror(int(found.group(1)))}, errno {found.group(1)}"
    if "No space left" in text:
        return "No space left on device"
    return text.splitlines()[0][:200] if text else type(e).__name__


def quiet_h5py_unraisable() -> None:
    """Drop the 'Exception ignored' reports of h5py objects freed after a failed write (a full disk), and pass every
    other unraisable exception on to the hook that was there: a bug elsewhere must still be seen."""
    import sys
    previous = sys.unraisablehook
    if getattr(previous, "cardiosim_h5py_filter", False):
        return

    def hook(unraisable):
        where = getattr(unraisable.object, "__module__", None) or type(unraisable.object).__module__
        if issubclass(unraisable.exc_type, (OSError, RuntimeError)) and str(where).startswith("h5py"):
            return
        previous(unraisable)

    hook.cardiosim_h5py_filter = True
    sys.unraisablehook = hook
