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
