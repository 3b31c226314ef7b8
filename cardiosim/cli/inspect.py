"""``cardiosim inspect FILE``: what a result file holds (cardiosim.output.results; docs/user/output-format.md)."""

from __future__ import annotations

from cardiosim.cli import common

START = common.LOCAL


def add_parser(sub) -> None:
    i = sub.add_parser("inspect", help="what a result file holds: grid, snapshots, ranges, probes, maps, timings")
    i.add_argument("file", help="HDF5 file of a run, or of cardiosim cell (a trace, restitution, population or "
                                "concentration series)")
    i.add_argument("--config", action="store_true", help="print the run's config text instead")


def main(args) -> int:
    from cardiosim.output.results import inspect_main   # lazy: h5py and NumPy, not for every verb's parser
    return inspect_main(args)
