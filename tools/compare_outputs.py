#!/usr/bin/env python3
"""Compare two cardiosim HDF5 files (run outputs, checkpoints, geometry files) dataset by dataset.

    python3 tools/compare_outputs.py A.h5 B.h5 [--atol 0] [--ignore-attr NAME ...]

Every dataset must have the same shape, dtype and bytes (NaN equal to NaN; with ``--atol`` a tolerance instead);
every attribute must be equal except those that name the code or the moment (version, commit, timing, dates,
host, wall-clock figures). Exit status 0 when the files match, 1 when they differ (each difference one line),
2 when a file cannot be read. A maintainer's tool for refactorings that must not change results: make the files
with the old tree and the new one, then compare them.
"""

from __future__ import annotations

import argparse
import sys

import h5py
import numpy as np

# Attributes that say which code made the file, when, where and how fast: they differ between two trees by design.
VOLATILE = ("version", "commit", "git", "hash", "time", "timing", "date", "host", "wall", "seconds", "elapsed",
            "energy", "created", "rate", "eta", "run_id", "python", "petsc", "pycuda", "mpi", "machine", "node", "cache")


def _volatile(name: str, extra: tuple[str, ...]) -> bool:
    low = name.lower()
    return name in extra or any(word in low for word in VOLATILE)


def _same(a, b, atol: float) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.dtype.kind in "fc":
        if atol:
            return bool(np.allclose(a, b, rtol=0.0, atol=atol, equal_nan=True))
        return bool(np.array_equal(a, b, equal_nan=True))
    return bool(np.array_equal(a, b))


def _attrs(path: str, x, y, extra, out: list[str]) -> None:
    if _volatile(path.rsplit("/", 1)[-1], extra):            # a group such as /timing: every attribute volatile
        return
    for key in sorted(set(x.attrs) | set(y.attrs)):
        if _volatile(key, extra):
            continue
        if key not in x.attrs or key not in y.attrs:
            out.append(f"{path}: attribute {key!r} only in {'the first' if key in x.attrs else 'the second'} file")
        elif not _same(x.attrs[key], y.attrs[key], 0.0):
            out.append(f"{path}: attribute {key!r} differs: {x.attrs[key]!r} against {y.attrs[key]!r}")


def compare(a: h5py.File, b: h5py.File, atol: float = 0.0, extra: tuple[str, ...] = ()) -> list[str]:
    """The differences between two open files, one line each; [] where they match."""
    out: list[str] = []
    names_a, names_b = [], []
    a.visit(names_a.append)
    b.visit(names_b.append)
    _attrs("/", a, b, extra, out)
    for name in sorted(set(names_a) | set(names_b)):
        if name not in a or name not in b:
            out.append(f"/{name}: only in {'the first' if name in a else 'the second'} file")
            continue
        x, y = a[name], b[name]
        if isinstance(x, h5py.Dataset) != isinstance(y, h5py.Dataset):
            out.append(f"/{name}: a dataset in one file, a group in the other")
            continue
        _attrs(f"/{name}", x, y, extra, out)
        if isinstance(x, h5py.Dataset) and not _volatile(name.rsplit("/", 1)[-1], extra):
            if x.shape != y.shape or x.dtype != y.dtype:
                out.append(f"/{name}: shape/dtype {x.shape} {x.dtype} against {y.shape} {y.dtype}")
            elif not _same(x[()], y[()], atol):
                out.append(f"/{name}: values differ")
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("first")
    p.add_argument("second")
    p.add_argument("--atol", type=float, default=0.0, help="absolute tolerance for floating-point data (default 0: bytes)")
    p.add_argument("--ignore-attr", action="append", default=[], help="an attribute name to leave out (repeatable)")
    args = p.parse_args(argv)
    try:
        with h5py.File(args.first, "r") as a, h5py.File(args.second, "r") as b:
            diff = compare(a, b, args.atol, tuple(args.ignore_attr))
    except OSError as e:
        print(f"compare_outputs: cannot read: {e}", file=sys.stderr)
        return 2
    for line in diff:
        print(line)
    print(f"{args.first} vs {args.second}: {'same' if not diff else f'{len(diff)} differences'}")
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
