"""A run's messages through the standard library's logging, rank 0 speaking for the job.

The logger is ``logging.getLogger("cardiosim")``. A filter on its handlers passes rank 0's records only (every rank
reaches the same conclusions; N ranks saying each line N times helps nobody), as Dedalus does
(dedalus/tools/logging.py). Two handlers are attached here: information on stdout as it is, warnings and errors on
stderr as ``cardiosim: warning: ...`` / ``cardiosim: error: ...``. Both look up ``sys.stdout``/``sys.stderr`` when
they write, so redirections made later (pytest's capture, a notebook) still see the messages. A script that wants
its own logging replaces them (``logging.getLogger("cardiosim").handlers``) or sets the level
(``--quiet`` sets NOTICE; ``logging.WARNING`` leaves only warnings and errors).

Levels: INFO the run's progress and tables; NOTICE (between INFO and WARNING) what the user must act on, shown even
with ``--quiet``; WARNING a finding about the run (the end-of-run checks); ERROR a user mistake, one line.
"""

from __future__ import annotations

import logging
import sys

from mpi4py import MPI

NOTICE = 25
logging.addLevelName(NOTICE, "NOTICE")

logger = logging.getLogger("cardiosim")


class RankFilter(logging.Filter):
    """Passes the records of rank ``rank`` of COMM_WORLD only."""

    def __init__(self, rank: int = 0):
        super().__init__()
        self.rank = rank

    def filter(self, record: logging.LogRecord) -> bool:
        return MPI.COMM_WORLD.rank == self.rank


class _Stream(logging.StreamHandler):
    """A StreamHandler on ``sys.<name>`` as it is when a record is written (not when the handler was made)."""

    def __init__(self, name: str):
        super().__init__()
        self._attr = name       # not _name: logging.Handler keeps the handler's own name there

    @property
    def stream(self):
        return getattr(sys, self._attr)

    @stream.setter
    def stream(self, value):     # StreamHandler.__init__ sets it; the attribute of sys wins
        pass


class _Prefixed(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"cardiosim: {record.levelname.lower()}: {record.getMessage()}"


def _handlers() -> None:
    out = _Stream("stdout")
    out.addFilter(lambda r: r.levelno < logging.WARNING)
    err = _Stream("stderr")
    err.setLevel(logging.WARNING)
    err.setFormatter(_Prefixed())
    for h in (out, err):
        h.addFilter(RankFilter(0))
        logger.addHandler(h)
    logger.setLevel(logging.INFO)
    logger.propagate = False      # the root logger's handlers (if a script has any) would say it all again


_handlers()


def set_quiet(quiet: bool) -> None:
    """--quiet: only what the user must act on (NOTICE and above)."""
    logger.setLevel(NOTICE if quiet else logging.INFO)


def is_quiet() -> bool:
    return logger.level > logging.INFO


def info(msg: str, force: bool = False) -> None:
    """On stdout from rank 0; ``force``: also with --quiet (what the user must act on)."""
    logger.log(NOTICE if force else logging.INFO, msg)


def warning(msg: str) -> None:
    """``cardiosim: warning: msg`` on stderr, from rank 0."""
    logger.warning(msg)


def error(msg: str) -> None:
    """One line on stderr, from rank 0 only (every rank reaches the same conclusion for user errors)."""
    logger.error(msg)
