"""``cardiosim sweep``: one config, many runs (the product of the varied keys' values, or their lists side by side),
run locally in parallel or as a SLURM job array, and one table of chosen outputs (CSV or HDF5).

    cardiosim sweep run/s1s2-restitution.toml --vary stimulus.S2.start=250:400:25 --out out/restitution \\
        --collect probe.centre.apd.2 probe.centre.di.2 --jobs 2

Each run is ``cardiosim run CONFIG --set KEY=VALUE ... --output OUT/run-NNN.h5`` (under mpirun with ``--np``), so
it is the same run as the command line gives, with its overrides stored in its output; the table has a row per run:
its number, the varied values, how it ended (finished, stopped, failed: exit status N, not started, or missing) and
the collected quantities (:data:`QUANTITIES`), NaN where a run has none. The varied values keep the types their TOML
gives (130 an int, 130.0 a float, true a bool). ``--link KEY=EXPRESSION`` computes a key of every run from the
varied ones (:class:`Link`: numbers, + - * /, parentheses, key names; no eval), a column of the table too.
``--plot Q --against KEY`` draws Q against KEY beside the table (cardiosim.output.sweep_plot). The same sweep from
Python: cardiosim.api.sweep (runs in this process), which gives the same table (:class:`Table`, which draws too).

Everything is checked before the first run starts (every run's config, every --collect quantity, every --link
and --plot, every file it would write, the table and its figures): a mistake is one line naming the run and the
key, exit status 2, nothing run or written. Then one line gives the plan: the number of runs, the disk their outputs need (from the output settings) and the
time (from the pace of a run finished in OUT before, or unknown). A run that fails (exit status 3) does not stop
the others; the sweep's exit status is then 3. The sweep's own process imports neither MPI nor PETSc (a nested
mpirun fails inside an MPI singleton's environment); the configs are checked in a child. One sweep at a time
writes into OUT (:func:`sweep_lock`).

A stop (Ctrl-C, SIGTERM, SIGUSR1; to the sweep or to its process group) is the run's stop, passed on
(cardiosim.runtime.signals): the runs going stop at their next step with a checkpoint, no other run starts, the
table says "stopped" and "not started", and the sweep exits with status 75. The same command again goes on: a
finished run is skipped, a stopped one restarts from its checkpoint (or from the start, where it has none), each
said in a line; ``--overwrite`` runs every run afresh.
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

import h5py
import numpy as np

from cardiosim.runtime import signals
from cardiosim.runtime.errors import UserError
from cardiosim.runtime.signals import STOPPED
from cardiosim.analysis.maps import cv_map, ecg_features
from cardiosim.analysis.probes import ecg_traces
from cardiosim.output.results import Results
from cardiosim.runtime.files import FileLock, Target, check_existing, check_places, check_writes, recognise, whole
from cardiosim.runtime.mpi import mpirun_command
from cardiosim.runtime.resources import n_nodes

QUANTITIES = {
    "activated": "share of the tissue's nodes that activated (0-1)",
    "activation_first": "first activation time (ms)",
    "total_activation": "last minus first activation time (ms; the QRS proxy)",
    "apd_mean": "mean APD of the first beat over the repolarised nodes (ms)",
    "qt": "last repolarisation minus first activation (ms), NaN unless every activated node repolarised",
    "cv": "median local conduction velocity, 1/|grad T| (m/s)",
    "warnings": "number of end-of-run warnings (cardiosim/analysis/checks.py)",
    "simulated_ms": "simulated time (ms)",
    "wall_s": "wall time of the run (s)",
    "probe.NAME.beats": "beats at probe NAME",
    "probe.NAME.activation.K": "activation time of beat K (1, 2, ...; or 'last') at probe NAME (ms)",
    "probe.NAME.apd.K": "APD of beat K at probe NAME (ms; the run's output.apd_level)",
    "probe.NAME.di.K": "diastolic interval before beat K at probe NAME: its activation minus the previous beat's "
                       "repolarisation (ms)",
    "probe.NAME.vpeak.K": "peak Vm of beat K at probe NAME (mV)",
    "cv.FROM.TO.K": "conduction velocity of beat K from probe FROM to probe TO, the one the wave reaches later: the "
                    "distance between their nodes over the time between the beat's activations there (m/s; NaN "
                    "where the beat does not reach TO)",
}
DEFAULT_COLLECT = ("activated", "total_activation", "apd_mean", "warnings")
_PROBE = re.compile(r"probe\.(?P<name>[A-Za-z0-9_.-]+?)\.(?:(?P<beats>beats)|(?P<what>activation|apd|di|vpeak)\."
                    r"(?P<k>\d+|last))$")
_CV = re.compile(r"cv\.(?P<pair>[A-Za-z0-9_.-]+\.[A-Za-z0-9_.-]+)\.(?P<k>\d+|last)$")
UNITS = {"activated": "1", "activation_first": "ms", "total_activation": "ms", "apd_mean": "ms", "qt": "ms",
         "cv": "m/s", "warnings": "1", "simulated_ms": "ms", "wall_s": "s", "beats": "1", "activation": "ms",
         "apd": "ms", "di": "ms", "vpeak": "mV"}


def quantity_unit(name: str) -> str:
    """The unit of a --collect quantity ("1": a share or a count)."""
    m = _PROBE.match(name)
    if m:
        return UNITS["beats" if m["beats"] else m["what"]]
    return "m/s" if _CV.match(name) else UNITS[name]


def probe_pair(name: str, pair: str, probes) -> tuple[str, str]:
    """(FROM, TO) of ``cv.FROM.TO.K``'s ``pair`` among ``probes`` (a probe's name may hold dots: every split is
    tried); one line naming the quantity where no split, or more than one, names two probes."""
    parts = pair.split(".")
    found = [(".".join(parts[:i]), ".".join(parts[i:])) for i in range(1, len(parts))]
    found = [(a, b) for a, b in found if a in probes and b in probes]
    if len(found) != 1:
        have = ", ".join(probes) or "none"
        why = "names no two probes" if not found else "names two probes in more than one way"
        raise UserError(f"--collect {name}: {pair} {why} (FROM.TO; probes: {have})")
    if found[0][0] == found[0][1]:
        raise UserError(f"--collect {name}: FROM and TO are the same probe; give two probes")
    return found[0]


# -- the plan ----------------------------------------------------------------------------------------------------
class Steps(Sequence):
    """The values a, a+step, ... of ``a:b:step`` as TOML texts, each made when it is read: a plan of ten million
    values is counted (and refused, :func:`plan_of`) without making them."""

    def __init__(self, a: float, step: float, n: int):
        self.a, self.step, self.n = a, step, n
        self.whole = all(float(x).is_integer() for x in (a, step))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        v = self.a + i * self.step
        return str(int(round(v))) if self.whole else repr(round(v, 12))

    def __eq__(self, other) -> bool:
        return isinstance(other, Sequence) and len(other) == self.n and list(self) == list(other)


def split_values(text: str) -> Sequence[str]:
    """``v1,v2,[1,2],"a,b"`` -> the values as TOML texts (commas inside brackets, braces and quotes stay);
    ``a:b:step`` (numbers) -> a, a+step, ... up to b inclusive (:class:`Steps`)."""
    m = re.fullmatch(r"\s*(-?[\d.eE+-]+):(-?[\d.eE+-]+):(-?[\d.eE+-]+)\s*", text)
    if m:
        try:
            a, b, step = (float(x) for x in m.groups())
        except ValueError:
            m = None
        else:
            if not all(math.isfinite(x) for x in (a, b, step)):
                raise UserError(f"--vary {text}: a:b:step must be finite numbers")
            if step == 0 or (b - a) / step < 0:
                raise UserError(f"--vary {text}: a:b:step must step from a towards b")
            return Steps(a, step, int(math.floor((b - a) / step + 1e-9)) + 1)
    out, depth, quote, cur = [], 0, None, ""
    for c in text:
        if quote:
            quote = None if c == quote else quote
        elif c in "\"'":
            quote = c
        elif c in "[{":
            depth += 1
        elif c in "]}":
            depth -= 1
        elif c == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
            continue
        cur += c
    out.append(cur.strip())
    if any(not v for v in out):
        raise UserError(f"--vary ...={text}: an empty value; give values as v1,v2,... or a:b:step")
    return out


def parse_vary(items) -> list[tuple[str, list[str]]]:
    """``["KEY=v1,v2", ...]`` -> [(KEY, [TOML texts])]; a key given twice is a mistake."""
    out, seen = [], set()
    for item in items:
        key, sep, values = item.partition("=")
        key = key.strip()
        if not sep or not key or not values.strip():
            raise UserError(f"--vary {item}: expected KEY=v1,v2,... or KEY=a:b:step")
        if key in seen:
            raise UserError(f"--vary {key}: given twice; give all its values in one --vary")
        seen.add(key)
        out.append((key, split_values(values)))
    return out


def runs_of(vary: list[tuple[str, list[str]]], zipped: bool = False) -> list[list[str]]:
    """The --set options of every run: the product of the values, or (``zipped``) the i-th value of every key."""
    if not vary:
        raise UserError("cardiosim sweep: give at least one --vary KEY=v1,v2,...")
    keys = [k for k, _ in vary]
    if zipped:
        lengths = {len(v) for _, v in vary}
        if len(lengths) != 1:
            raise UserError("--zip: every --vary needs as many values (" + ", ".join(f"{k}: {len(v)}" for k, v in vary)
                            + ")")
        combos = list(zip(*(v for _, v in vary)))
    else:
        combos = list(itertools.product(*(v for _, v in vary)))
    return [[f"{k}={v}" for k, v in zip(keys, combo)] for combo in combos]


# -- linked keys: a key computed from the varied ones ----------------------------------------------------------
_TOKEN = re.compile(r"\s*(?:(?P<num>(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)|(?P<name>[A-Za-z_][A-Za-z0-9_]*"
                    r"(?:\.[A-Za-z0-9_]+)*)|(?P<op>[-+*/()]))")


class Link:
    """``KEY=EXPRESSION`` of ``--link``: numbers, + - * /, parentheses and the names of varied keys (or of keys
    linked before), read by a small parser of its own (nothing is handed to Python's eval). :meth:`value` gives
    the key's value in a run, to 12 significant digits (10*0.1 is 1): a whole number is an int (0.4/simulation.dt
    with dt 0.1 is 4, which an integer key such as simulation.ode_substeps takes; a number key takes it too), any
    other a float."""

    def __init__(self, item: str, known: list[str]):
        key, sep, text = item.partition("=")
        self.key, self.text, self.item = key.strip(), text.strip(), item
        if not sep or not self.key or not self.text:
            raise UserError(f"--link {item}: expected KEY=EXPRESSION (numbers, + - * /, parentheses and varied "
                            f"keys), e.g. simulation.duration=10*stimulus.S1.period")
        self.tokens, self.pos = self._tokens(), 0
        self.tree = self._sum()
        if self.pos < len(self.tokens):
            raise self._error(f"unexpected {self.tokens[self.pos][1]!r}")
        for name in self.names(self.tree):
            if name not in known:
                raise UserError(f"--link {item}: {name} is not a varied key (varied: {', '.join(known)}); a link "
                                f"is computed from the --vary keys and the links before it")

    def _error(self, what: str) -> UserError:
        return UserError(f"--link {self.item}: {what} in {self.text!r}; an expression holds numbers, + - * /, "
                         f"parentheses and varied keys")

    def _tokens(self) -> list[tuple[str, str]]:
        out, i = [], 0
        while i < len(self.text):
            m = _TOKEN.match(self.text, i)
            if not m or m.end() == i:
                if self.text[i:].strip() == "":
                    break
                raise UserError(f"--link {self.item}: {self.text[i:].strip()[0]!r} in {self.text!r} is not a "
                                f"number, + - * /, a parenthesis or a key name")
            kind = m.lastgroup
            out.append((kind, m[kind]))
            i = m.end()
        return out

    def _peek(self) -> str | None:
        return self.tokens[self.pos][1] if self.pos < len(self.tokens) else None

    def _left(self, operators: tuple[str, str], operand):
        """``operand (op operand)*`` for the two operators of one precedence, left-associative."""
        tree = operand()
        while self._peek() in operators:
            op = self.tokens[self.pos][1]
            self.pos += 1
            tree = (op, tree, operand())
        return tree

    def _sum(self):
        return self._left(("+", "-"), self._product)

    def _product(self):
        return self._left(("*", "/"), self._factor)

    def _factor(self):
        if self.pos >= len(self.tokens):
            raise self._error("a number, a key or '(' missing at the end")
        kind, text = self.tokens[self.pos]
        self.pos += 1
        if text in ("-", "+"):
            return ("neg" if text == "-" else "pos", self._factor())
        if text == "(":
            tree = self._sum()
            if self._peek() != ")":
                raise self._error("')' missing")
            self.pos += 1
            return tree
        if kind == "num":
            v = float(text)
            return ("num", int(text) if re.fullmatch(r"\d+", text) else v)
        if kind == "name":
            return ("name", text)
        raise self._error(f"unexpected {text!r}")

    @staticmethod
    def names(tree) -> list[str]:
        if tree[0] == "name":
            return [tree[1]]
        if tree[0] == "num":
            return []
        return [n for sub in tree[1:] for n in Link.names(sub)]

    def value(self, values: dict, run: int):
        """The key's value in run ``run``, whose varied (and linked) values are ``values`` {key: value}."""
        v = self._eval(self.tree, values, run)
        if not math.isfinite(v):
            raise UserError(f"--link {self.item}: gives {v} in run {run}; it must be a finite number")
        if isinstance(v, int):
            return v
        v = float(f"{v:.12g}")
        return int(v) if v.is_integer() else v

    def _eval(self, tree, values: dict, run: int):
        op = tree[0]
        if op == "num":
            return tree[1]
        if op == "name":
            v = values[tree[1]]
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise UserError(f"--link {self.item}: {tree[1]} is {_cell(v)!r} in run {run}, not a number")
            return v
        if op in ("neg", "pos"):
            v = self._eval(tree[1], values, run)
            return -v if op == "neg" else v
        a, b = self._eval(tree[1], values, run), self._eval(tree[2], values, run)
        if op == "/":
            if b == 0:
                raise UserError(f"--link {self.item}: divides by zero in run {run} ({_cell(values)})")
            return a / b
        return a + b if op == "+" else a - b if op == "-" else a * b


def parse_links(items, vary, fixed=()) -> list[Link]:
    """The ``--link KEY=EXPRESSION`` options, in order; a linked key that is varied, given with --set, or linked
    twice is one line."""
    known, links = [k for k, _ in vary], []
    fixed_keys = {s.partition("=")[0].strip() for s in fixed}
    for item in items:
        link = Link(item, known)
        if link.key in known:
            raise UserError(f"--link {item}: {link.key} is "
                            + ("varied (--vary)" if link.key in (k for k, _ in vary) else "linked already")
                            + "; a key is either varied or linked, once")
        if link.key in fixed_keys:
            raise UserError(f"--link {item}: {link.key} is given with --set too; give it one way")
        known.append(link.key)
        links.append(link)
    return links


def linked(runs: list[list[str]], links: list[Link]) -> list[list[str]]:
    """Every run's --set options with its linked keys' after the varied ones'."""
    if not links:
        return runs
    out = []
    for i, sets in enumerate(runs):
        values = {s.split("=", 1)[0]: toml_value(s.split("=", 1)[1]) for s in sets}
        extra = []
        for link in links:
            values[link.key] = link.value(values, i)
            extra.append(f"{link.key}={values[link.key]!r}")
        out.append([*sets, *extra])
    return out


def check_collect(names) -> None:
    for n in names:
        if n not in QUANTITIES and not _PROBE.match(n) and not _CV.match(n):
            raise UserError(f"--collect {n}: unknown; allowed: {', '.join(QUANTITIES)}")


def run_path(out: Path, i: int) -> Path:
    return out / f"run-{i:03d}.h5"


# -- collecting --------------------------------------------------------------------------------------------------
def collect(path: Path, names) -> dict:
    """The quantities ``names`` of one run's output (NaN where it has none)."""
    row = {n: float("nan") for n in names}
    with Results(path) as r:
        act = r.map("activation_time") if "activation_time" in r.maps else None
        inside = r.map("tissue") > 0 if "tissue" in r.maps else None
        beats, cvs = {}, {}
        for n in names:
            m, c = _PROBE.match(n), _CV.match(n)
            if c:
                pair = probe_pair(n, c["pair"], list(r.probes))
                cv = cvs[pair] if pair in cvs else cvs.setdefault(pair, r.cv_beats(*pair))
                k = len(cv) if c["k"] == "last" else int(c["k"])
                if 1 <= k <= len(cv):
                    row[n] = float(cv[k - 1])
            elif m:
                p = m["name"]
                if p not in r.probes:
                    raise UserError(f"--collect {n}: {path} has no probe {p}; probes: {', '.join(r.probes) or 'none'}")
                b = beats.setdefault(p, r.beats(p))
                if m["beats"]:
                    row[n] = float(b["count"])
                    continue
                k = b["count"] if m["k"] == "last" else int(m["k"])
                if not 1 <= k <= b["count"]:
                    continue
                if m["what"] == "activation":
                    row[n] = float(b["activation"][k - 1])
                elif m["what"] == "apd":
                    row[n] = float(b["apd"][k - 1])
                elif m["what"] == "vpeak":
                    row[n] = float(b["v_peak"][k - 1])
                elif k >= 2:
                    row[n] = float(b["activation"][k - 1] - b["activation"][k - 2] - b["apd"][k - 2])
            elif n == "warnings":
                w = r.warnings
                row[n] = float(len(w)) if w is not None else float("nan")
            elif n in ("simulated_ms", "wall_s"):
                v = r.attr(n)
                row[n] = float(v) if v is not None else float("nan")
            elif act is not None:
                a = act if inside is None else act[inside]
                ok = np.isfinite(a)
                if n == "activated":
                    row[n] = float(ok.mean()) if a.size else float("nan")
                elif n == "activation_first" and ok.any():
                    row[n] = float(a[ok].min())
                elif n == "total_activation" and ok.any():
                    row[n] = float(a[ok].max() - a[ok].min())
                elif n == "apd_mean" and "apd" in r.maps:
                    apd = r.map("apd") if inside is None else r.map("apd")[inside]
                    if np.isfinite(apd).any():
                        row[n] = float(np.nanmean(apd))
                elif n == "qt":
                    qt = ecg_features(r).get("QT")
                    row[n] = float(qt) if qt is not None else float("nan")
                elif n == "cv":
                    cv = cv_map(act, r.spacing)
                    if inside is not None:
                        cv = cv[inside]
                    if np.isfinite(cv).any():
                        row[n] = float(np.nanmedian(cv))
    return row


def toml_value(text: str):
    """A --set value's TOML text as the value it is (130 an int, 130.0 a float, true a bool, [1, 2] a list); a
    text that is not TOML is a string, as ``--set`` takes it (cardiosim.config.load.parse_override)."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def table(out: Path, runs: list[list[str]], columns, names, statuses: dict) -> list[dict]:
    """A row per run: run, the values of ``columns`` (the varied keys, then the linked ones; each run's --set
    options in that order, their values of the types the TOML gives), status, the quantities. ``statuses``: of the
    runs this sweep ran that did not finish; another run's status is its file's (:func:`file_status`)."""
    rows = []
    for i, sets in enumerate(runs):
        row = {"run": i, **{k: toml_value(s.split("=", 1)[1]) for k, s in zip(columns, sets)}}
        path = run_path(out, i)
        status = statuses.get(i) or file_status(path)
        values = {n: float("nan") for n in names}
        if path.exists():
            try:
                values = collect(path, names)
            except UserError as e:
                if "--collect" in str(e):
                    raise
                status = f"unreadable ({e})"
        rows.append({**row, "status": status, **values})
    return rows


class Table(list):
    """The rows of a sweep's table (a list of dicts, as :func:`table` makes them), and what drew them: the table's
    path, the varied keys and the links, the quantities collected, the keys' units and the config's name."""

    def __init__(self, rows, path: Path, vary, links, collect, units: dict, name: str):
        super().__init__(rows)
        self.path, self.vary, self.links, self.collect = Path(path), vary, links, list(collect)
        self.units, self.name = units, name

    def plot(self, quantity: str, against: str, path=None, overwrite: bool = False) -> Path | None:
        """Draw ``quantity`` against ``against`` as ``cardiosim sweep --plot quantity --against against`` does,
        into ``path`` (default beside the table, ``<table stem>_Q_vs_KEY.png``); an existing file is replaced
        with ``overwrite`` only, and only a PNG cardiosim drew. The path, or None where no run has a value."""
        runs = [[f"{k}={_cell(r[k])}" for k in [k for k, _ in self.vary] + [lk.key for lk in self.links]]
                for r in self]
        plots = plot_targets([quantity], against, self.vary, self.links, self.collect, self.path, runs)
        if path is not None:
            plots.figures = [(quantity, Path(path))]
        check_writes([Target("--plot", p, "png") for _, p in plots], {"the table": self.path}, overwrite)
        drawn = draw_plots(plots, self, self.units, self.name, quiet=True)
        return drawn[0] if drawn else None


def file_status(path: Path) -> str:
    """How a run's output says it ended: finished, stopped (at a checkpoint, on a signal), failed (stopped by an
    error), "did not end" (killed, or still running), or missing."""
    if not path.exists():
        return "missing"
    try:
        with h5py.File(path, "r", locking=False) as f:
            status, by = _text(f.attrs.get("status", "finished")), _text(f.attrs.get("stopped_by", ""))
    except (OSError, ValueError, RuntimeError):
        return "finished"          # what collect() makes of it says more: unreadable (...)
    if status == "stopped":
        return "stopped" if by == "checkpoint" else "failed: stopped by an error"
    return status if status == "finished" else "did not end"


def write_table(path: Path, rows: list[dict]) -> None:
    """The table as CSV (``.csv``) or HDF5 (``.h5``: a dataset per column), whole or not at all: a write that fails
    (a full disk) is one line, exit status 3, and leaves no table there (cardiosim.runtime.files.whole)."""
    if path.suffix == ".h5":
        with whole(path, "--table") as tmp, h5py.File(tmp, "w", rdcc_nbytes=0) as f:
            f.attrs["format"] = "cardiosim-sweep-1"
            for col in rows[0]:
                vals = [r[col] for r in rows]
                if all(isinstance(v, bool) for v in vals):
                    f[col] = np.array(vals, dtype=bool)
                elif all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in vals):
                    f[col] = np.array(vals, dtype=float if any(isinstance(v, float) for v in vals) else int)
                else:
                    f[col] = np.array([_cell(v) for v in vals], dtype=h5py.string_dtype())
    else:
        with whole(path, "--table") as tmp, open(tmp, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=list(rows[0]))
            w.writeheader()
            for r in rows:
                w.writerow({k: _cell(v) for k, v in r.items()})


def _cell(v) -> str:
    """A table cell: a number, bool or list as TOML writes it (130, 130.0, true, [1, 2]), so that the varied
    values read back as the types they were given; a string as it is."""
    if isinstance(v, str):
        return v
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_cell(x) if not isinstance(x, str) else json.dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_cell(x) if not isinstance(x, str) else json.dumps(x)}"
                               for k, x in v.items()) + "}"
    return str(v)


# -- checking and running ----------------------------------------------------------------------------------------
def check_configs(config: str, runs: list[list[str]], out: Path, names=()) -> list[dict]:
    """Every run's config validated, and every --collect quantity one the runs can have, in a child process (this
    one stays free of MPI and PETSc); the first mistake is one line naming the run. Returns, per run, what
    :func:`check_child` says of it: its files, its checkpoint, its grid nodes, its simulated ms and about how
    many bytes its output takes."""
    # The child in a session of its own: a Ctrl-C meant for the sweep reaches the sweep alone (which looks at it
    # once the check is done), not the check as a KeyboardInterrupt.
    proc = subprocess.run([sys.executable, "-m", "cardiosim.simulation.sweep", "--check", config],
                          input=json.dumps({"runs": runs, "out": str(out), "collect": list(names)}),
                          capture_output=True, text=True, env=_child_env(), start_new_session=True)
    said = proc.stdout.strip().splitlines()
    if proc.returncode != 0:
        said = said or proc.stderr.strip().splitlines() or ["the check failed"]
        raise UserError(said[-1])
    return json.loads(said[-1])


def check_child(config: str) -> int:
    # lazy, in the --check child: cardiosim.config imports mpi4py and cardiosim.output.writer PETSc, which the
    # sweep's own process does not
    from cardiosim import config as cfgmod
    from cardiosim.output import checkpoint, writer
    plan = json.loads(sys.stdin.read())
    out, info = Path(plan["out"]), []
    for i, sets in enumerate(plan["runs"]):
        try:
            cfg = cfgmod.load(config, sets)
        except UserError as e:
            print(f"cardiosim sweep: run {i} (--set {' --set '.join(sets)}): {e}")
            return 2
        probes = [p.name for p in cfg.probe]
        for n in plan["collect"]:
            m, c = _PROBE.match(n), _CV.match(n)
            if m and m["name"] not in probes:
                print(f"cardiosim sweep: --collect {n}: run {i} has no probe {m['name']} (its probes: "
                      f"{', '.join(probes) or 'none'}); nothing run")
                return 2
            if c:
                try:
                    probe_pair(n, c["pair"], probes)
                except UserError as e:
                    print(f"cardiosim sweep: run {i}: {e}; nothing run")
                    return 2
        path = run_path(out, i)
        ckpt = checkpoint.resolve_path(cfg, path)
        nodes, steps = n_nodes(cfg), cfg.simulation.n_steps
        # the output's datasets as cardiosim.output.writer lays them out, at their full length from the start, and
        # about 64 KB of attributes, maps and sidecars
        fields = len(cfg.output.fields) + len(cfg.output.states)
        at_probes = (2 if cfg.simulation.equations == "bidomain" else 1) + len(cfg.output.states)
        size = 8 * (writer.planned_snapshots(steps, writer.snapshot_every(cfg)) * (1 + nodes * fields)
                    + (steps + 1) * (1 + len(probes) * at_probes + len(ecg_traces(cfg)))) + (64 << 10)
        info.append({"files": [[t.what, str(t.path), t.kind] for t in writer.run_targets(path, ckpt)],
                     "checkpoint": str(ckpt), "nodes": nodes, "ms": cfg.simulation.duration, "bytes": size,
                     "units": {s.split("=", 1)[0]: key_unit(cfg, s.split("=", 1)[0]) for s in sets}})
    print(json.dumps(info))
    return 0


def key_unit(cfg, key: str) -> str:
    """The unit of a config key (a --set key: ``stimulus.S1.period``, ``grid.spacing``), as its declaration gives it
    (cardiosim.config.schema.key): "1" for a number declared without one, "" where it is not known (a model
    parameter, in the model's own units; a key that is no number)."""
    node, parts = cfg, key.split(".")
    for i, part in enumerate(parts):
        if isinstance(node, list):
            found = [e for j, e in enumerate(node) if (part.isdigit() and j == int(part))
                     or getattr(e, "name", None) == part]
            if not found:
                return ""
            node = found[0]
            continue
        if not dataclasses.is_dataclass(node):
            return ""
        fields = {f.name: f for f in dataclasses.fields(node)}
        if part not in fields:
            return ""
        if i == len(parts) - 1:
            f = fields[part]
            unit = f.metadata.get("unit", "")
            numeric = str(f.type).replace("list[", "").rstrip("]") in ("float", "int")
            return unit or ("1" if numeric else "")
        node = getattr(node, part)
    return ""


def _child_env() -> dict:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    return env


def _text(v) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def earlier(out: Path, i: int, sets: list[str], config_text: str, ckpt: Path) -> tuple[str, str]:
    """What an earlier sweep into ``out`` left of run ``i`` (its --set options ``sets``): ("new", ""),
    ("finished", ""), ("restart", the checkpoint's time in ms), ("rerun", why it runs again from the start), or
    ("other", what the file is): a file that is not this run's (another config or other --set options)."""
    path = run_path(out, i)
    if not (path.exists() or path.is_symlink()):
        return "new", ""
    try:
        with h5py.File(path, "r", locking=False) as f:
            a = {k: f.attrs[k] for k in ("format", "config", "overrides", "status", "stopped_by") if k in f.attrs}
    except (OSError, ValueError, RuntimeError):
        return "other", "not a readable cardiosim result file"
    try:
        same = (_text(a.get("format", "")) in ("cardiosim-1", "cardiosim-2") and _text(a.get("config")) == config_text
                and json.loads(_text(a.get("overrides", "[]"))) == list(sets))
    except ValueError:
        same = False
    if not same:
        return "other", "the output of a run of another config or other --set options"
    status = _text(a.get("status", "finished"))
    if status == "finished":
        return "finished", ""
    if recognise(ckpt, "checkpoint"):
        try:
            with h5py.File(ckpt, "r", locking=False) as c:
                return "restart", f"{float(c.attrs['t']):g}"
        except (OSError, KeyError, ValueError, RuntimeError):
            pass
    if status == "stopped":
        why = "stopped" if _text(a.get("stopped_by", "")) == "checkpoint" else "stopped by an error"
    else:
        why = "did not end (killed?)"
    return "rerun", f"{why}, no checkpoint"


def sweep_lock(out: Path) -> FileLock:
    """``OUT/.sweep.lock``: one sweep at a time into a folder, held for the sweep's life. A second sweep into the
    same folder is refused in one line naming the lock file and the holder's pid and host; a lock file left behind
    by a sweep that died is taken over (``.left`` names who left it). ``OUT`` is made for it; a sweep refused later
    removes the lock file and what it made (``release(refused=True)``)."""
    path = out / ".sweep.lock"
    return FileLock(path, f"--out {out}",
                    busy=lambda holder: f"--out {out}: in use by another sweep ({holder or 'a process'}; lock "
                                        f"file {path}); wait for it to end or choose another --out")


def _checkpoint_line(stdout: str) -> str:
    """``t = X ms`` from a stopped run's "checkpoint written at t = X ms; ..." line, or ""."""
    m = re.search(r"checkpoint written at (t = [^;]+ms)", stdout)
    return f" ({m[1]})" if m else ""


def run_local(config: str, runs, out: Path, jobs: int, ranks: int, todo: dict, quiet: bool,
              rate: float | None = None, nodes=None) -> dict:
    """Run the runs of ``todo`` ({run: the extra options of its ``cardiosim run``: --overwrite, --restart CKPT}),
    ``jobs`` at a time, each on ``ranks`` ranks; {run: status} of those that did not finish.

    A stop (SIGINT, SIGTERM, SIGUSR1; cardiosim.runtime.signals) is passed on to the runs going at that moment,
    which stop at their next step with a checkpoint; no other run starts, and this returns once they have ended
    (their status "stopped", the others' "not started"). Each run is a session of its own, so that a signal to
    the sweep's process group reaches the sweep alone and each run gets it once, from here. ``rate``: wall seconds
    per simulated ms and grid node (from an earlier run), for the time left after each run (``nodes``: run ->
    [grid nodes, simulated ms])."""
    launcher = mpirun_command(ranks) if ranks > 1 else []
    statuses, started = {}, time.perf_counter()
    lock, going, passed = threading.Lock(), {}, []
    left = dict.fromkeys(todo)
    measured = [rate]

    def one(i):
        with lock:     # no run starts once a stop has come; a run that has started is in `going` for forward()
            if signals.received:
                statuses[i] = "not started"
                left.pop(i, None)
                return
            cmd = [*launcher, sys.executable, "-m", "cardiosim", "run", config, "--quiet", "--output",
                   str(run_path(out, i)), *todo[i]]
            for s in runs[i]:
                cmd += ["--set", s]
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                    env=_child_env(), start_new_session=True)
            going[i] = proc
        began = time.perf_counter()
        stdout, stderr = proc.communicate()
        wall = time.perf_counter() - began
        with lock:
            going.pop(i, None)
            left.pop(i, None)
            rc, detail = proc.returncode, ""
            if rc == STOPPED or (passed and rc in (130, -signal.SIGINT, -signal.SIGTERM, -signal.SIGUSR1)):
                statuses[i] = "stopped"
                detail = " at its checkpoint" + _checkpoint_line(stdout) if rc == STOPPED else \
                    " before its first step"
            elif rc != 0:
                statuses[i] = f"failed: exit status {rc}"
            elif nodes and "--restart" not in todo[i]:    # a whole run: its pace, for the time the others take
                n, ms = nodes[i]
                measured[0] = wall / max(n * ms, 1e-9)
            eta = ""
            if measured[0] and not passed and left:
                rest = sum(nodes[j][0] * nodes[j][1] for j in left) * measured[0] / min(jobs, len(left))
                eta = f"; about {_duration(rest)} left"
            if not quiet:
                errs = [ln for ln in stderr.splitlines() if ln.startswith("cardiosim: error")]
                print(f"run {i} ({' '.join(runs[i])}): {statuses.get(i, 'finished')}{detail}"
                      + (f" - {errs[-1]}" if errs else "")
                      + f" [{time.perf_counter() - started:.1f} s since the sweep began{eta}]",
                      flush=True)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(one, i) for i in todo]
        while not all(f.done() for f in futures):
            wait(futures, timeout=0.05)
            if signals.received and not passed:
                with lock:
                    passed.append(signals.received[0])
                    reached = {i: p.pid for i, p in going.items()
                               if signals.forward(signals.received[0], [p.pid])}
                word = signals.name(passed[0])
                print(f"cardiosim sweep: {word}: "
                      + (f"passed on to run{'s' if len(reached) > 1 else ''} "
                         f"{', '.join(str(i) for i in sorted(reached))}, waiting for "
                         f"{'their checkpoints' if len(reached) > 1 else 'its checkpoint'}; " if reached else "")
                      + "no further run starts", flush=True)
        for f in futures:
            f.result()
    return statuses


def _duration(s: float) -> str:
    return f"{s:.0f} s" if s < 120 else f"{s / 60:.0f} min" if s < 7200 else f"{s / 3600:.1f} h"


SLURM = """#!/bin/bash
# A SLURM job array of the sweep {out} ({n} runs), written by: {command}
# Submit: sbatch {script}; then collect the table: {collect}
#SBATCH --job-name=cardiosim-sweep
#SBATCH --array=0-{last}
#SBATCH --ntasks={ranks}
#SBATCH --time=01:00:00
#SBATCH --output={out}/run-%a.slurm.log
set -euo pipefail
i=$(printf "%03d" "$SLURM_ARRAY_TASK_ID")
# the run's --set options, one a line, from the plan written beside this script
mapfile -t sets < <({python} -c 'import json, sys
for s in json.load(open(sys.argv[1]))["runs"][int(sys.argv[2])]: print(s)' {plan} "$SLURM_ARRAY_TASK_ID")
args=()
for s in "${{sets[@]}}"; do args+=(--set "$s"); done
srun {python} -m cardiosim run {config} --quiet --output {out}/run-$i.h5 "${{args[@]}}"
"""


def write_slurm(config, runs, out: Path, ranks: int, command: str, collect_cmd: str) -> Path:
    plan = out / "sweep.json"
    script = out / "sweep.sbatch"
    plan.write_text(json.dumps({"config": config, "runs": runs}, indent=1) + "\n")
    # absolute paths: the job runs wherever SLURM starts it
    script.write_text(SLURM.format(out=out.resolve(), n=len(runs), command=command, script=script, collect=collect_cmd,
                                   last=len(runs) - 1, ranks=ranks, plan=plan.resolve(),
                                   config=Path(config).resolve(), python=sys.executable))
    return script


# -- the command -------------------------------------------------------------------------------------------------
MAX_RUNS = 1000      # runs a sweep makes without --max-runs


def count_runs(vary, zipped: bool) -> int:
    """How many runs the --vary values make, without making them."""
    if zipped:
        return len(vary[0][1]) if vary else 0
    return math.prod(len(v) for _, v in vary)


def plan_of(args):
    """(vary, the runs' --set options, OUT, the table's path, the table's key columns, the figures) of ``cardiosim
    sweep``'s options; a plan of more runs than --max-runs (default :data:`MAX_RUNS`) is one line, before any run's
    options are made."""
    vary = parse_vary(args.vary)
    if args.max_runs < 1:
        raise UserError(f"--max-runs {args.max_runs}: must be >= 1")
    n = count_runs(vary, args.zip)
    if n > args.max_runs and not (args.zip and len({len(v) for _, v in vary}) > 1):
        raise UserError(f"cardiosim sweep: {n} runs planned (" + ", ".join(f"--vary {k}: {len(v)} values"
                                                                            for k, v in vary)
                        + f"), more than --max-runs {args.max_runs}; nothing run. Give --max-runs {n} to make them "
                          f"all, or vary fewer values")
    links = parse_links(args.link, vary, args.set)
    runs = [[*args.set, *sets] for sets in linked(runs_of(vary, args.zip), links)]
    check_collect(args.collect)
    columns = [k for k, _ in vary] + [link.key for link in links]
    if args.jobs < 1 or args.np < 1:
        raise UserError("--jobs and --np: must be >= 1")
    out = Path(args.out)
    table_path = Path(args.table) if args.table else out / "sweep.csv"
    if table_path.suffix not in (".csv", ".h5"):
        raise UserError(f"--table {table_path}: must end in .csv or .h5")
    plots = plot_targets(args.plot, args.against, vary, links, args.collect, table_path,
                         [r[len(args.set):] for r in runs])
    return vary, runs, out, table_path, columns, plots


@dataclasses.dataclass
class Plots:
    """The figures a sweep draws: [(Q, its path)], the key or quantity they are drawn against, and the varied keys
    whose values make the lines."""
    figures: list
    against: str | None = None
    lines: list = dataclasses.field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.figures)

    def __iter__(self):
        return iter(self.figures)


def plot_targets(quantities, against, vary, links, collect, table_path: Path, runs) -> Plots:
    """The figures of ``--plot Q ... --against KEY``, beside the table (``<table stem>_Q_vs_KEY.png``), checked
    before anything runs: Q collected, KEY a varied (or linked) key whose values are numbers or words, or a
    collected quantity. The lines: the varied keys other than KEY (and than those a linked KEY is computed
    from); against a collected quantity, the first --vary traces each curve and the others make the lines."""
    quantities = list(dict.fromkeys(quantities or ()))
    varied = [k for k, _ in vary]
    columns = varied + [link.key for link in links]
    if not quantities:
        if against:
            raise UserError(f"--against {against}: draws --plot Q against it; give --plot Q as well")
        return Plots([])
    keys = ", ".join(k for k, _ in vary)
    if not against:
        raise UserError(f"--plot {quantities[0]}: give --against KEY, a varied key ({keys}) or a collected quantity")
    for q in quantities:
        if q not in collect:
            raise UserError(f"--plot {q}: not collected (--collect {' '.join(collect)}); add it to --collect")
    if against in columns:
        i = columns.index(against)
        bad = [r[i].split("=", 1)[1] for r in runs if isinstance(toml_value(r[i].split("=", 1)[1]), (list, dict))]
        if bad:
            raise UserError(f"--against {against}: its values are lists or tables ({bad[0]}, ...); a figure's axis "
                            f"takes numbers or words")
    elif against not in collect:
        raise UserError(f"--against {against}: neither a varied key ({keys}) nor a collected quantity "
                        f"(--collect {' '.join(collect)})")
    if against in varied:
        lines = [k for k in varied if k != against]
    elif against in columns:
        used = {against}
        for link in reversed(links):         # the keys a linked key is computed from, through links before it
            if link.key in used:
                used |= set(Link.names(link.tree))
        lines = [k for k in varied if k not in used]
    else:
        lines = varied[1:]
    return Plots([(q, table_path.with_name(f"{table_path.stem}_{q}_vs_{against}.png")) for q in quantities],
                 against, lines)


def draw_plots(plots: Plots, rows, units: dict, title: str, quiet: bool = False) -> list[Path]:
    """The figures of ``plots`` from the table's ``rows`` (``units``: the keys'), each said in a line (or why it
    has none) unless ``quiet``; the paths written."""
    # lazy: matplotlib only for a sweep that draws
    from cardiosim.output.sweep_plot import plot_sweep
    against, written = plots.against, []
    units = {**units, **{q: quantity_unit(q) for q, _ in plots}}
    if against not in units:
        units[against] = quantity_unit(against)
    for q, path in plots:
        drawn = plot_sweep(rows, q, against, path, units, plots.lines, title)
        if not quiet:
            print(f"wrote {path}" if drawn else f"no figure of {q} against {against}: no run has a value of both")
        if drawn:
            written.append(path)
    return written


def command(args, argv) -> int:
    """``cardiosim sweep``: ``args`` its options (parsed by cardiosim.cli.sweep), ``argv`` its words (written into
    the SLURM script). The stop signals are caught already (cardiosim.cli)."""
    started = time.perf_counter()
    vary, runs, out, table_path, columns, plots = plan_of(args)
    fixed = len(args.set)
    if args.collect_only and not out.is_dir():
        raise UserError(f"--out {out}: no such folder; --collect-only collects the runs of an earlier sweep there")
    lock = sweep_lock(out)
    if lock.left:
        print(f"note: took over the lock file {lock.path}, left by {lock.left}, which is no longer running",
              flush=True)
    ran = False
    try:
        if args.collect_only:
            check_writes([Target("--table", table_path, "sweep-table")] + [Target("--plot", p, "png")
                                                                          for _, p in plots], {}, True)
            # the keys' units, from the first run's config
            info = check_configs(args.config, runs[:1], out) if plots else [{"units": {}}]
            statuses = {}
        else:
            info = check_configs(args.config, runs, out, args.collect)
            if args.slurm:
                extra = [Target("--slurm", out / n, "sweep-plan") for n in ("sweep.json", "sweep.sbatch")]
                check_writes(extra, {"the config": Path(args.config)}, args.overwrite)
                command = "cardiosim sweep " + " ".join(argv)
                collect_cmd = command.replace(" --slurm", "") + " --collect-only"
                script = write_slurm(args.config, runs, out, args.np, command, collect_cmd)
                print(f"wrote {script} ({len(runs)} runs); sbatch {script}, then: {collect_cmd}")
                ran = True
                return 0
            todo = plan_runs(args, runs, out, table_path, info, plots)
            if signals.received:          # during the checks: nothing has started
                print(f"cardiosim sweep: {signals.name(signals.received[0])}: stopped before the first run; "
                      f"nothing run", flush=True)
                return STOPPED
            ran = True
            nodes = {i: (d["nodes"], d["ms"]) for i, d in enumerate(info)}
            statuses = run_local(args.config, runs, out, args.jobs, args.np, todo, args.quiet,
                                 rate=_rate(out, todo, runs, nodes), nodes=nodes) if todo else {}
        rows = table(out, [r[fixed:] for r in runs], columns, args.collect, statuses)
        write_table(table_path, rows)
        ran = True
        finished = sum(r["status"] == "finished" for r in rows)
        print(f"wrote {table_path} ({len(rows)} runs, {finished} finished; {time.perf_counter() - started:.1f} s "
              f"wall)")
        if plots:
            draw_plots(plots, rows, info[0]["units"], Path(args.config).stem)
        count = {s: sum(r["status"] == s for r in rows) for s in ("stopped", "not started")}
        if signals.received and any(count.values()):
            print(f"cardiosim sweep: stopped by {signals.name(signals.received[0])}: {count['stopped']} run(s) "
                  f"stopped at a checkpoint, {count['not started']} not started, {finished} finished; the same "
                  f"command again goes on (finished runs are skipped, stopped ones restart from their "
                  f"checkpoints)", flush=True)
            return STOPPED
        return 3 if any(r["status"] != "finished" for r in rows) else 0
    finally:
        lock.release(refused=not ran)


def plan_runs(args, runs, out: Path, table_path: Path, info: list[dict], plots=()) -> dict:
    """What each run does, from what an earlier sweep into OUT left (:func:`earlier`), and every file checked
    before anything runs: {run: the extra options of its ``cardiosim run``} of the runs to do. Without --overwrite
    a finished run is skipped, a stopped one restarts from its checkpoint (or runs again from the start where it
    has none), each said in a line; a file that is not this run's is refused. --overwrite runs every run afresh."""
    config_text = Path(args.config).read_text()
    todo, said = {}, []
    targets = []           # (target, whether it may be replaced: --overwrite, or a run that goes again)
    resumed = False
    for i, (sets, d) in enumerate(zip(runs, info)):
        mine = [Target(what, Path(p), kind) for what, p, kind in d["files"]]
        label = f"run {i} ({' '.join(sets[len(args.set):])})"
        state, why = ("new", "") if args.overwrite else earlier(out, i, sets, config_text, Path(d["checkpoint"]))
        if state == "finished":
            said.append(f"{label}: finished by an earlier sweep, skipped")
            resumed = True
            continue
        if state == "other":
            raise UserError(f"{run_path(out, i)} exists: {why}; pass --overwrite to replace it, or choose "
                            f"another --out")
        if state == "restart":
            said.append(f"{label}: stopped at t = {why} ms; restarts from its checkpoint {d['checkpoint']}")
            todo[i] = ["--restart", d["checkpoint"]]
            check_places(mine, {"the config": Path(args.config)})
            resumed = True
            continue
        if state == "rerun":
            said.append(f"{label}: {why}; runs again from the start")
            resumed = True
        todo[i] = ["--overwrite"] if args.overwrite or state == "rerun" else []
        targets += [(t, bool(todo[i])) for t in mine]
    table_target = Target("--table", table_path, "sweep-table")
    figures = [Target("--plot", p, "png") for _, p in plots]      # replaced where the table is
    check_places([table_target, *figures, *(t for t, _ in targets)], {"the config": Path(args.config)})
    check_existing([table_target, *figures], args.overwrite, allow=["--table", "--plot"] if resumed else ())
    for t, replace in targets:
        check_existing([t], replace)
    if not args.quiet:
        for line in said:
            print(line, flush=True)
        print(estimate(out, runs, info, todo, args.jobs), flush=True)
    return todo


def _rate(out: Path, todo: dict, runs, nodes: dict) -> float | None:
    """Wall seconds per simulated ms and grid node, from the runs of this plan an earlier sweep finished in OUT
    (their wall_s), or None where there are none."""
    rates = []
    for i in range(len(runs)):
        if i in todo:
            continue
        try:
            with h5py.File(run_path(out, i), "r", locking=False) as f:
                wall = float(f.attrs["wall_s"])
        except (OSError, KeyError, ValueError, RuntimeError):
            continue
        n, ms = nodes[i]
        rates.append(wall / max(n * ms, 1e-9))
    return sum(rates) / len(rates) if rates else None


def estimate(out: Path, runs, info: list[dict], todo: dict, jobs: int) -> str:
    """The plan in one line: how many runs (to do, skipped), the disk their outputs take (from the output
    settings) against the free space, and the time (from the pace of a run an earlier sweep finished in OUT, or
    unknown)."""
    if not todo:
        return f"sweep: {len(runs)} runs, all finished before: nothing to run"
    need = sum(info[i]["bytes"] for i in todo)
    free = shutil.disk_usage(out).free
    rate = _rate(out, todo, runs, {i: (d["nodes"], d["ms"]) for i, d in enumerate(info)})
    work = sum(info[i]["nodes"] * info[i]["ms"] for i in todo)
    when = (f"about {_duration(work * rate / min(jobs, len(todo)))} at the pace of the runs finished before"
            if rate else "time unknown (no finished run in this folder to measure a pace from)")
    skipped = len(runs) - len(todo)
    disk = f"{need / 1e6:.3g} MB" if need < 1e9 else f"{need / 1e9:.3g} GB"
    warn = "; more than is free there" if need > free else ""
    return (f"sweep: {len(runs)} runs" + (f" ({len(todo)} to run, {skipped} finished before)" if skipped else "")
            + f"; their outputs need about {disk} of disk ({free / 1e9:.3g} GB free in {out}{warn}); {when}")


if __name__ == "__main__":      # the check of every run's config, in a child (check_configs): --check CONFIG
    sys.exit(check_child(sys.argv[2]))
