"""Writing a config back as TOML: the effective config of a run (the file with every ``--set`` applied), stored in
its output (``config_effective``) so that the run can be repeated from the output alone.

Why our own: Python reads TOML (tomllib) but does not write it, and a config holds only tables, arrays of tables,
strings, numbers, booleans, lists of these and inline tables of numbers; that is thirty lines, checked by a round
trip (tests/test_study.py), against a new dependency (tomli-w) for every installation.
"""

from __future__ import annotations

import json
import math


def dumps(data: dict) -> str:
    """``data`` (as tomllib returns it) as TOML text that tomllib reads back to the same dict."""
    lines: list[str] = []
    _table(data, [], lines)
    return "\n".join(lines).strip() + "\n"


def _key(k: str) -> str:
    return k if k and all(c.isalnum() or c in "_-" for c in k) else json.dumps(k)


def _value(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)    # a JSON string is a TOML basic string
    if isinstance(v, list):
        return "[" + ", ".join(_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ", ".join(f"{_key(k)} = {_value(x)}" for k, x in v.items()) + "}"
    raise TypeError(f"cannot write {type(v).__name__} as TOML")


def _is_table_array(v) -> bool:
    return isinstance(v, list) and bool(v) and all(isinstance(x, dict) for x in v)


def _table(data: dict, path: list[str], lines: list[str]) -> None:
    # Plain keys first (they belong to this table's header), then sub-tables and arrays of tables.
    for k, v in data.items():
        if not isinstance(v, dict) and not _is_table_array(v):
            lines.append(f"{_key(k)} = {_value(v)}")
    for k, v in data.items():
        here = [*path, _key(k)]
        if isinstance(v, dict):
            lines.extend(["", f"[{'.'.join(here)}]"])
            _table(v, here, lines)
        elif _is_table_array(v):
            for item in v:
                lines.extend(["", f"[[{'.'.join(here)}]]"])
                _table(item, here, lines)
