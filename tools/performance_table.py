#!/usr/bin/env python3
"""docs/performance.md, and the figures in README.md between its performance markers, from benchmarks/*.json.

    python3 tools/performance_table.py            (make performance) regenerate both
    python3 tools/performance_table.py --check    exit 1, naming them, where either is not what the records give

One file per benchmark case, ``benchmarks/<case>.json``::

    {"case": "<case>",                  the file's own name, without .json
     "title": "...", "measures": "...",   what the case runs and what its numbers are
     "notes": "...",                      optional: true of every record of the case
     "readme": {"order": 1, "line": "..."},   optional: a headline line for README.md (below)
     "records": [
       {"label": "1 GPU",               what this measurement is, unique in the case
        "values": [{"name": "Total", "value": 96.98, "unit": "ms"}, ...],   the first is the headline
        "machine": "one host with 4 NVIDIA H200", "gpu": "NVIDIA H200",
        "commit": "556b9eb" or null (the tree measured, where it is known),
        "date": "2026-11-28",
        "command": "cardiosim bench table41 ... --ranks 1",   what produced it, run from the repository root
        "notes": "..."},                  optional
       {"label": ..., "reference": true, "source": "...", "commit": null, "date": null, "command": null, ...}
     ]}

A record with ``"reference": true`` is a figure quoted from elsewhere (a peer code, the seed); its ``source`` says
where from. A README line names records in braces: ``{label}`` is the record's first value, ``{label|name}`` the
value of that name, ``{case:label}`` and ``{case:label|name}`` a record of another case. README.md is rewritten only
between ``<!-- performance:begin -->`` and ``<!-- performance:end -->``, and only where both markers are there.

Standard library only: it needs no virtual environment.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- performance:begin -->", "<!-- performance:end -->"

CASE_KEYS = {"case": True, "title": True, "measures": True, "records": True, "notes": False, "readme": False}
RECORD_KEYS = {"label": True, "values": True, "machine": True, "gpu": True, "commit": True, "date": True,
               "command": True, "notes": False, "reference": False, "source": False}
VALUE_KEYS = {"name", "value", "unit"}
SUPERSCRIPT = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")


class RecordError(ValueError):
    """A benchmarks/*.json file that is not a valid case: the message names the file and the field."""


def _check_keys(where: str, d, spec: dict) -> None:
    if not isinstance(d, dict):
        raise RecordError(f"{where}: expected an object")
    unknown = sorted(set(d) - set(spec))
    if unknown:
        raise RecordError(f"{where}: unknown field(s) {', '.join(unknown)} (allowed: {', '.join(spec)})")
    missing = [k for k, required in spec.items() if required and k not in d]
    if missing:
        raise RecordError(f"{where}: missing field(s) {', '.join(missing)}")


def _text(where: str, value, null: bool = False) -> None:
    if value is None and null:
        return
    if not isinstance(value, str) or not value.strip():
        raise RecordError(f"{where}: expected {'a string or null' if null else 'a non-empty string'}, "
                          f"got {value!r}")


def validate(case: dict, path: Path) -> dict:
    """``case`` as read from ``path``, checked: every required field, of the right kind; raises RecordError."""
    _check_keys(str(path), case, CASE_KEYS)
    for k in ("case", "title", "measures"):
        _text(f"{path}: {k}", case[k])
    if case["case"] != path.stem:
        raise RecordError(f"{path}: case {case['case']!r} is not the file's name ({path.stem!r})")
    _text(f"{path}: notes", case.get("notes", "-"))
    if "readme" in case:
        r = case["readme"]
        _check_keys(f"{path}: readme", r, {"order": True, "line": True})
        if not isinstance(r["order"], int) or isinstance(r["order"], bool):
            raise RecordError(f"{path}: readme.order: expected an integer, got {r['order']!r}")
        _text(f"{path}: readme.line", r["line"])
    if not isinstance(case["records"], list) or not case["records"]:
        raise RecordError(f"{path}: records: expected a non-empty list")
    labels = set()
    for i, rec in enumerate(case["records"]):
        where = f"{path}: records[{i}]"
        _check_keys(where, rec, RECORD_KEYS)
        _text(f"{where}.label", rec["label"])
        if rec["label"] in labels:
            raise RecordError(f"{where}.label: {rec['label']!r} twice in the case")
        labels.add(rec["label"])
        where = f"{path}: records[{i}] ({rec['label']})"
        if not isinstance(rec["values"], list) or not rec["values"]:
            raise RecordError(f"{where}.values: expected a non-empty list")
        for j, v in enumerate(rec["values"]):
            if not isinstance(v, dict) or set(v) != VALUE_KEYS:
                raise RecordError(f"{where}.values[{j}]: expected exactly the fields name, value, unit")
            _text(f"{where}.values[{j}].name", v["name"])
            if not isinstance(v["value"], (int, float)) or isinstance(v["value"], bool):
                raise RecordError(f"{where}.values[{j}].value: expected a number, got {v['value']!r}")
            if not isinstance(v["unit"], str):
                raise RecordError(f"{where}.values[{j}].unit: expected a string ('' for none)")
        _text(f"{where}.machine", rec["machine"])
        _text(f"{where}.gpu", rec["gpu"])
        if rec["commit"] is not None and not re.fullmatch(r"[0-9a-f]{7,40}", str(rec["commit"])):
            raise RecordError(f"{where}.commit: expected a git hash (7-40 hex digits) or null, got {rec['commit']!r}")
        reference = rec.get("reference", False)
        if not isinstance(reference, bool):
            raise RecordError(f"{where}.reference: expected true or false")
        if reference:
            _text(f"{where}.source", rec.get("source"))
            _text(f"{where}.command", rec["command"], null=True)
        else:
            _text(f"{where}.command", rec["command"])
        if rec["date"] is not None or not reference:
            if not isinstance(rec["date"], str) or not re.fullmatch(r"\d{4}-\d\d-\d\d", rec["date"]):
                raise RecordError(f"{where}.date: expected YYYY-MM-DD{' or null' if reference else ''}, "
                                  f"got {rec['date']!r}")
        _text(f"{where}.notes", rec.get("notes", "-"))
    return case


def load(folder: Path) -> list[dict]:
    """Every case in ``folder`` (``*.json``, not its subfolders), checked: the README's ones first, in their order,
    then the others by name."""
    cases = []
    for path in sorted(Path(folder).glob("*.json")):
        try:
            case = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as e:
            raise RecordError(f"{path}: not JSON: {e}") from None
        cases.append(validate(case, path))
    if not cases:
        raise RecordError(f"{folder}: no benchmarks/*.json records")
    return sorted(cases, key=lambda c: (c.get("readme", {}).get("order", 10 ** 6), c["case"]))


def number(x) -> str:
    """A value as its record holds it: 96.98, 0.648, 96,859, 5.21·10⁹ (the digits stored, no more)."""
    if isinstance(x, int):
        return f"{x:,}"
    if x != 0 and (abs(x) >= 1e5 or abs(x) < 1e-3):
        mantissa, exponent = f"{x:.15e}".split("e")
        mantissa = mantissa.rstrip("0").rstrip(".")
        mantissa = f"{float(mantissa):.12g}"
        return f"{mantissa}·10{str(int(exponent)).translate(SUPERSCRIPT)}"
    text = repr(float(x))
    return text[:-2] if text.endswith(".0") else text


def quantity(v: dict) -> str:
    unit = v["unit"]
    if not unit:
        return number(v["value"])
    if unit == "×":
        return number(v["value"]) + "×"
    return f"{number(v['value'])} {unit}"


def values_cell(rec: dict) -> str:
    parts = []
    for i, v in enumerate(rec["values"]):
        q = quantity(v)
        parts.append(f"{v['name']} **{q}**" if i == 0 else f"{v['name']} {q}")
    return "; ".join(parts)


def cell(text) -> str:
    return "—" if text is None else str(text).replace("|", "\\|").replace("\n", " ")


def code(text) -> str:
    if text is None:
        return "—"
    return "`" + str(text).replace("|", "\\|") + "`"


def render_case(case: dict) -> str:
    out = [f"## {case['title']}", "", f"`benchmarks/{case['case']}.json`. {case['measures']}", ""]
    if case.get("notes"):
        out += [case["notes"], ""]
    out += ["| run | machine | GPU | commit | date | command | value |", "|---|---|---|---|---|---|---|"]
    notes: dict[str, list[str]] = {}                 # a note -> the records it is about, in their order
    previous = None
    for rec in case["records"]:
        reference = rec.get("reference", False)
        label = rec["label"] + (" (reference)" if reference else "")
        commit = code(rec["commit"]) if rec["commit"] else ("—" if reference else "not recorded")
        command = "as above" if rec["command"] is not None and rec["command"] == previous else code(rec["command"])
        previous = rec["command"]
        out.append("| " + " | ".join([cell(label), cell(rec["machine"]), cell(rec["gpu"]), commit,
                                      cell(rec["date"]), command, cell(values_cell(rec))]) + " |")
        for key in ("source", "notes"):
            if rec.get(key):
                notes.setdefault(rec[key], []).append(rec["label"])
    if notes:
        out.append("")
        for note, labels in notes.items():
            about = "every row" if len(labels) == len(case["records"]) > 1 else "; ".join(labels)
            out.append(f"- {about}: {note}")
    return "\n".join(out) + "\n"


def render_doc(cases: list[dict]) -> str:
    out = [
        "# Performance",
        "",
        "<!-- Generated by `make performance` (tools/performance_table.py) from benchmarks/*.json: edit those, "
        "not this page. -->",
        "",
        "cardiosim's current measured figures, one table per benchmark case. Each row is one measurement: the "
        "machine and GPU it ran on, the commit of the tree measured (\"not recorded\" where the run did not say), "
        "the date, the command that produced it and its values, the first of them the headline. A command runs "
        "from the repository root on a machine like the one named; the options that only say where its output "
        "goes (`--json`, `--write`) are left out. A row marked \"reference\" is a figure quoted from elsewhere (a "
        "peer code, the seed), not measured by cardiosim's commands; its note says where it comes from.",
        "",
        "To re-measure: run a row's command, then record what it printed in the case's file under `benchmarks/` "
        "(the same fields, with the machine, the commit and the date of the run) and regenerate this page and "
        "the README's figures with `make performance`. `make bench`, `make bench-kernels`, `make bench-table41`, "
        "`make bench-niederer` and `make bench-cellml` write their raw results to `benchmarks/raw/`. Earlier "
        "measurements and their raw output are in the git history.",
        "",
        "The cases:",
        "",
    ]
    out += [f"- {c['title']} (`benchmarks/{c['case']}.json`)" for c in cases]
    out.append("")
    return "\n".join(out) + "\n" + "\n".join(render_case(c) for c in cases)


PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


def _lookup(cases: dict, case: dict, ref: str) -> str:
    target, name = (ref.split("|", 1) + [None])[:2]
    other = case
    if ":" in target and target.split(":", 1)[0] in cases:
        other_name, target = target.split(":", 1)
        other = cases[other_name]
    rec = next((r for r in other["records"] if r["label"] == target), None)
    if rec is None:
        raise RecordError(f"benchmarks/{case['case']}.json: readme.line names {{{ref}}}: no record labelled "
                          f"{target!r} in {other['case']}")
    if name is None:
        return quantity(rec["values"][0])
    v = next((v for v in rec["values"] if v["name"] == name), None)
    if v is None:
        raise RecordError(f"benchmarks/{case['case']}.json: readme.line names {{{ref}}}: record {target!r} has no "
                          f"value named {name!r}")
    return quantity(v)


def render_readme_block(cases: list[dict]) -> str:
    by_name = {c["case"]: c for c in cases}
    lines = []
    for case in cases:
        if "readme" in case:
            lines.append("- " + PLACEHOLDER.sub(lambda m, c=case: _lookup(by_name, c, m.group(1)),
                                                case["readme"]["line"]))
    return "\n".join(lines)


def rewrite_readme(text: str, block: str) -> str | None:
    """``text`` with the part between the performance markers replaced by ``block``; None where the markers are not
    both there (in that order): then nothing of the README is touched."""
    b = text.find(BEGIN)
    e = text.find(END, b + len(BEGIN)) if b >= 0 else -1
    if b < 0 or e < 0:
        return None
    return text[:b + len(BEGIN)] + "\n" + block + "\n" + text[e:]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--benchmarks", type=Path, default=ROOT / "benchmarks", help="the records (default benchmarks/)")
    p.add_argument("--doc", type=Path, default=ROOT / "docs" / "performance.md", help="the page written")
    p.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the README whose marked block is "
                   "rewritten")
    p.add_argument("--check", action="store_true", help="write nothing; exit 1 where a file is out of date")
    a = p.parse_args(argv)
    try:
        cases = load(a.benchmarks)
        doc = render_doc(cases)
        block = render_readme_block(cases)
    except RecordError as e:
        print(f"performance_table: error: {e}", file=sys.stderr)
        return 2
    stale = []
    if not a.doc.exists() or a.doc.read_text(encoding="utf-8") != doc:
        stale.append(a.doc)
        if not a.check:
            a.doc.parent.mkdir(parents=True, exist_ok=True)
            a.doc.write_text(doc, encoding="utf-8")
    readme = None
    if a.readme.exists():
        old = a.readme.read_text(encoding="utf-8")
        readme = rewrite_readme(old, block)
        if readme is not None and readme != old:
            stale.append(a.readme)
            if not a.check:
                a.readme.write_text(readme, encoding="utf-8")
    if a.check:
        for path in stale:
            print(f"performance_table: {path} is not what {a.benchmarks}/*.json give: run make performance",
                  file=sys.stderr)
        return 1 if stale else 0
    done = ", ".join(str(s) for s in stale) or "nothing (already current)"
    print(f"performance_table: {len(cases)} cases; wrote {done}")
    if readme is None:
        print(f"performance_table: {a.readme} has no {BEGIN} ... {END} block: left as it is")
    return 0


if __name__ == "__main__":
    sys.exit(main())
