"""``cardiosim config --doc`` (the reference of every key) and ``cardiosim config check CONFIG`` (cardiosim.config)."""

from __future__ import annotations

import sys

from cardiosim.cli import common
from cardiosim.runtime.errors import UserError

START = common.MPI


def add_parser(sub) -> None:
    c = sub.add_parser("config", help="config reference and checking", usage="cardiosim config --doc | "
                                                                              "cardiosim config check CONFIG")
    c.add_argument("--doc", action="store_true", help="print the reference of every key (markdown)")
    c.add_argument("check", nargs="?", metavar="check", help="check CONFIG: validate a config file, as a run would "
                                                            "(one line per mistake; exit status 2)")
    c.add_argument("file", nargs="?", metavar="CONFIG", help="the config file to check")


def main(args) -> int:
    common.start_petsc(args)
    from cardiosim import config   # lazy: NumPy, when it runs
    from cardiosim.runtime import log   # lazy: loads MPI
    if args.doc:
        if args.comm.rank == 0:
            sys.stdout.write(config.reference_markdown())
        return 0
    if args.check == "check" and args.file:
        mistakes = config.check_all(args.file)
        for line in mistakes:
            log.error(line)
        if mistakes:
            return 2
        log.info(f"{args.file}: ok")
        return 0
    raise UserError("cardiosim config: use --doc, or check CONFIG")
