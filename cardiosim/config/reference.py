"""The key reference (``cardiosim config --doc``, docs/user/config.md), generated from the declarations of
cardiosim.config.schema: one table per section, in declaration order; a section's subsections and table arrays
follow its table."""

from __future__ import annotations

import dataclasses
import typing

from cardiosim.config.schema import Config, describe_type, format_value, is_section, keys_of


def reference_markdown() -> str:
    lines = ["# Config keys", "",
             "Generated from `cardiosim/config/` by `cardiosim config --doc`. Units: cm, ms, mV, mS/cm, "
             "µF/cm², µA/cm² (per membrane area), µA/cm³ (per volume).", ""]
    for f, tp in keys_of(Config):
        inner = typing.get_args(tp)[0] if typing.get_origin(tp) is list else tp
        _section(lines, inner, f"[{f.name}]" if typing.get_origin(tp) is list else f.name)
    return "\n".join(lines) + "\n"


def _section(lines: list[str], cls, title: str) -> None:
    """The table of section ``cls`` appended to ``lines``, then its subsections' ([name] for a table array)."""
    lines.extend([f"## `{title}`", "", "| key | type | default | unit | allowed | meaning |",
                  "|---|---|---|---|---|---|"])
    subs = []
    for f, tp in keys_of(cls):
        m = f.metadata
        if is_section(tp) or (typing.get_origin(tp) is list and is_section(typing.get_args(tp)[0])):
            inner = tp if is_section(tp) else typing.get_args(tp)[0]
            subs.append((inner, f"{title}.{f.name}" if title != "(top)" else f.name,
                         typing.get_origin(tp) is list))
            continue
        lines.append(f"| `{f.name}` | {describe_type(tp)} | {_default(f)} | {m.get('unit', '')} | "
                     f"{', '.join(_allowed(m))} | {m.get('doc', '')} |")
    lines.append("")
    for inner, name, is_list in subs:
        _section(lines, inner, f"[{name}]" if is_list else name)


def _default(f: dataclasses.Field) -> str:
    """A key's default as the reference shows it ('required' where it has none)."""
    if f.default is not dataclasses.MISSING:
        return "—" if f.default is None else f"`{format_value(f.default)}`"
    if f.default_factory is not dataclasses.MISSING:
        return f"`{f.default_factory()}`"
    return "required"


def _allowed(m) -> list[str]:
    """A key's allowed values: its choices, bounds and length."""
    allowed = []
    if m.get("choices"):
        allowed.append(" \\| ".join(m["choices"]))
    for op, sym in (("gt", ">"), ("ge", "≥"), ("lt", "<"), ("le", "≤")):
        if m.get(op) is not None:
            allowed.append(f"{sym} {m[op]}")
    if m.get("length"):
        allowed.append(f"{m['length'][0]}–{m['length'][1]} entries")
    return allowed
