"""Loading a config: TOML text or file -> ``--set`` overrides applied -> sections built and validated
(cardiosim.config.validate) -> Config. Relative paths written in a config file are made relative to its folder.
``check_all`` reports every mistake of a file, not only the first.
"""

from __future__ import annotations

import re
import typing
from pathlib import Path

try:  # Python 3.11+
    import tomllib
except ModuleNotFoundError:  # pragma: no cover - Python 3.10
    import tomli as tomllib

from cardiosim.config import tomlwrite
from cardiosim.config.schema import H5_DATASETS, Config, ConfigError, is_section
from cardiosim.config.validate import build, validate
from cardiosim.runtime import files


def parse_override(text: str) -> tuple[list[str], object]:
    """``section.key=value`` -> (["section", "key"], value); the value is read as TOML, else as a string."""
    if "=" not in text:
        raise ConfigError(f"--set {text}: expected section.key=value")
    path, raw = text.split("=", 1)
    parts = path.strip().split(".")
    if not all(parts):
        raise ConfigError(f"--set {text}: expected section.key=value")
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return parts, value


def apply_overrides(data: dict, overrides: list[str]) -> None:
    """Apply ``--set`` overrides to the TOML data. An entry of a table array is named by its index from 0 or by its
    ``name`` key: ``stimulus.1.start=300``, ``stimulus.S2.start=300``, ``ecg.leads.II.plus='"LA"'``; the whole array
    is replaced by giving it as TOML (``--set 'probe=[{name = "p", position = [0.5]}]'``)."""
    for text in overrides:
        parts, value = parse_override(text)
        node = data
        for i, p in enumerate(parts[:-1]):
            node = _override_step(node, p, parts[:i], text)
            if not isinstance(node, (dict, list)):
                raise ConfigError(f"--set {text}: {'.'.join(parts[:i + 1])} is not a section")
        if isinstance(node, list):
            raise ConfigError(f"--set {text}: {'.'.join(parts[:-1])} is a table array; name one of its entries "
                              f"(by index or name), e.g. {'.'.join(parts[:-1])}.0.{parts[-1]}")
        node[parts[-1]] = value


def _override_step(node, part: str, before: list[str], text: str):
    """One step of an override's path: a key of a table, or an entry of a table array by index or by name."""
    if not isinstance(node, list):
        return node.setdefault(part, {})
    where = ".".join(before)
    names = [e.get("name") for e in node if isinstance(e, dict)]
    if part.isdigit():
        if int(part) >= len(node):
            raise ConfigError(f"--set {text}: {where} has {len(node)} entries (0 to {len(node) - 1}); got index "
                              f"{part}")
        return node[int(part)]
    found = [e for e in node if isinstance(e, dict) and e.get("name") == part]
    if len(found) != 1:
        have = ", ".join(str(n) for n in names if n) or "none has a name"
        raise ConfigError(f"--set {text}: {where} has {'no' if not found else 'more than one'} entry named "
                          f"'{part}'; names: {have} (or give the index, 0 to {len(node) - 1})")
    return found[0]


# Keys naming files. A relative path written in a config file is relative to that file's folder (the config and
# its fibre file travel together); one given with --set, like --output, to the working directory. cell.model too,
# where it names a CellML file.
PATH_KEYS = (("tissue", "fibre_file"), ("tissue", "conductivity_file"), ("tissue", "label_file"), ("output", "path"),
             ("checkpoint", "path"), ("tissue.microscopic", "layout_file"), ("cell", "initial_state"),
             ("purkinje", "network"))


def loads(text: str, overrides: list[str] = (), name: str = "config", path: Path | None = None) -> Config:
    """``path``: the file ``text`` was read from; relative paths in it are taken relative to its folder."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"{name}: not valid TOML: {e}") from None
    overridden = {tuple(parse_override(o)[0]) for o in overrides}
    apply_overrides(data, list(overrides))
    effective = tomlwrite.dumps(data) if overrides else text
    for sec in ("simulation", "grid"):
        if sec not in data:
            raise ConfigError(f"{sec}: missing section [{sec}]")
    cfg = build(Config, data, "")
    cfg.source_text, cfg.source_name = text, name
    cfg.overrides, cfg.effective_text = list(overrides), effective
    if path is not None:
        cfg.source_path = str(path)
        _resolve_paths(cfg, path.parent, overridden)
    return validate(cfg)


def _resolve_paths(cfg: Config, folder: Path, overridden: set) -> None:
    """Make the relative paths written in the config file relative to its ``folder`` (not those given with --set:
    ``overridden`` holds their key paths); each key so changed is listed in cfg.resolved (messages about a
    missing file then say how a relative path is read)."""
    for sec, k in PATH_KEYS:
        section = cfg
        for part in sec.split("."):
            section = getattr(section, part)
        v = getattr(section, k)
        if v and (*sec.split("."), k) not in overridden and not Path(v).is_absolute():
            setattr(section, k, str(folder / v))
            cfg.resolved.append(f"{sec}.{k}")
    m = cfg.cell.model
    if m.lower().endswith(".cellml") and ("cell", "model") not in overridden and not Path(m).is_absolute():
        cfg.cell.model = str(folder / m)
        cfg.resolved.append("cell.model")
    m = cfg.purkinje.model                        # the network's model, as cell.model
    if m.lower().endswith(".cellml") and ("purkinje", "model") not in overridden and not Path(m).is_absolute():
        cfg.purkinje.model = str(folder / m)
        cfg.resolved.append("purkinje.model")
    for i, r in enumerate(cfg.cell.regions):      # a region's own model, as cell.model
        given = ("cell", "regions", str(i), "model") in overridden or ("cell", "regions") in overridden
        if r.model.lower().endswith(".cellml") and not given and not Path(r.model).is_absolute():
            r.model = str(folder / r.model)
            cfg.resolved.append(f"cell.regions[{i}].model")


def load(path: str | Path, overrides: list[str] = ()) -> Config:
    path = files.check_input(None, path, "config file")
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"{path}: cannot read: {e}") from None
    return loads(text, overrides, name=path.stem, path=path)


def check_all(path: str | Path, overrides: list[str] = (), most: int = 50) -> list[str]:
    """Every mistake of a config file, one line each (``cardiosim config check``). Validation stops at the first
    mistake, so the key it names is taken out of the file (its default then applies, or the check that needs it
    says it is missing) and the file validated again, until it passes, a mistake repeats, or one names no key
    (a mistake that follows from an earlier one is not reported twice)."""
    path = files.check_input(None, path, "config file")
    try:
        text = path.read_text()
        data = tomllib.loads(text)
    except (OSError, UnicodeDecodeError) as e:
        return [f"{path}: cannot read: {e}"]
    except tomllib.TOMLDecodeError as e:
        return [f"{path.stem}: not valid TOML: {e}"]
    found: list[str] = []
    stand_ins: list[str] = []     # required keys given a stand-in value: what mentions them follows from their mistake
    for _ in range(most):
        try:
            loads(tomlwrite.dumps(data) if found else text, overrides, name=path.stem, path=path)
            return found
        except ConfigError as e:
            msg = str(e)
            where = msg.split(":", 1)[0].strip()
            missing = msg.startswith(f"{where}: missing")
            reported = {f.split(":", 1)[0].strip() for f in found}
            follows = where in stand_ins or any(re.search(rf"\b{re.escape(k)}\b", msg) for k in stand_ins)
            if (missing and where in reported) or follows:
                # a consequence of a mistake already reported: not said again
                if missing and _stand_in(data, where):
                    stand_ins.append(where)
                    continue
                if not missing and _drop_key(data, where):
                    continue
                return found
            if msg in found:
                return found
            found.append(msg)
            if msg.startswith("--set") or not _drop_key(data, where):
                return found
    return found


def _stand_in(data: dict, where: str) -> bool:
    """Put a value of the right type in place of a required key that was taken out (``check_all``)."""
    section, _, name = where.rpartition(".")
    cls, node = Config, data
    for p in section.split(".") if section else []:
        hints = typing.get_type_hints(cls)
        if p not in hints or not is_section(hints[p]) or not isinstance(node.get(p), dict):
            return False
        cls, node = hints[p], node[p]
    tp = typing.get_type_hints(cls).get(name)
    value = {float: 1.0, int: 1, str: "x", bool: False}.get(tp, [1.0] if typing.get_origin(tp) is list else None)
    if value is None:
        return False
    node[name] = value
    return True


def _drop_key(data: dict, where: str) -> bool:
    """Take the key ``where`` (``section.key``, ``stimulus[0].start``, ``grid.spacing[1]``) out of TOML data;
    False where it names no key that is there."""
    parts = []
    for p in where.split("."):
        m = re.fullmatch(r"([A-Za-z_][\w-]*)((?:\[\d+\])*)", p)
        if not m:
            return False
        parts.append(m.group(1))
        parts.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group(2)))
    while parts and isinstance(parts[-1], int):   # grid.spacing[1]: the list is the key
        parts.pop()
    node = data
    for p in parts[:-1]:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return False
    if not isinstance(node, dict) or not parts or parts[-1] not in node:
        return False
    del node[parts[-1]]
    return True


def input_files(cfg) -> dict:
    """{how the user calls it: path} of every file a run of ``cfg`` reads; cardiosim.runtime.files refuses a run that would
    write one of them."""
    t = cfg.tissue
    reads = {"the config file of this run": cfg.source_path,
             **{f"tissue.{k}": getattr(t, k) for k in H5_DATASETS},
             "tissue.microscopic.layout_file": t.microscopic.layout_file,
             "cell.model": cfg.cell.model if cfg.cell.model.lower().endswith(".cellml") else ""}
    return {k: v for k, v in reads.items() if v}
