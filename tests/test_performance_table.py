"""tools/performance_table.py: docs/performance.md and the README's figures from the records in benchmarks/*.json.
The generator on two small records; every record in benchmarks/ complete, its command one this tree has; the page
(and the README's block, where it has the markers) what the records give."""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RECORDS = sorted((ROOT / "benchmarks").glob("*.json"))
REQUIRED = ("label", "values", "machine", "gpu", "commit", "date", "command")


def _tool():
    spec = importlib.util.spec_from_file_location("performance_table", ROOT / "tools" / "performance_table.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _write(folder: Path, case: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{case['case']}.json").write_text(json.dumps(case, indent=2))


ALPHA = {
    "case": "alpha", "title": "Alpha sheet", "measures": "ms per step of the alpha sheet.",
    "readme": {"order": 1, "line": "Alpha: {2 GPUs} on two, {1 GPU|cells} of cells on one."},
    "records": [
        {"label": "1 GPU", "values": [{"name": "step", "value": 12.5, "unit": "ms"},
                                      {"name": "cells", "value": 3.25, "unit": "ms"}],
         "machine": "one host with 2 NVIDIA H200, 32 cores", "gpu": "NVIDIA H200", "commit": "0123abc",
         "date": "2026-11-28", "command": "cardiosim bench table41 --ranks 1", "notes": "one round"},
        {"label": "2 GPUs", "values": [{"name": "step", "value": 7.75, "unit": "ms"}],
         "machine": "one host with 2 NVIDIA H200, 32 cores", "gpu": "NVIDIA H200", "commit": "0123abc",
         "date": "2026-11-28", "command": "cardiosim bench table41 --ranks 2"},
        {"label": "2 GPUs, again", "values": [{"name": "step", "value": 7.5, "unit": "ms"}],
         "machine": "one host with 2 NVIDIA H200, 32 cores", "gpu": "NVIDIA H200", "commit": "0123abc",
         "date": "2026-11-28", "command": "cardiosim bench table41 --ranks 2"},
    ]}
BETA = {
    "case": "beta", "title": "Beta kernel", "measures": "cell-steps/s of the beta kernel.",
    "records": [
        {"label": "peer code", "values": [{"name": "rate", "value": 2.2e9, "unit": "cell-steps/s"}],
         "machine": "one NVIDIA H100", "gpu": "NVIDIA H100", "commit": None, "date": None, "command": None,
         "reference": True, "source": "as the peer's paper quotes it"},
    ]}


def test_generator_on_two_records(tmp_path):
    tool = _tool()
    bench = tmp_path / "benchmarks"
    _write(bench, ALPHA)
    _write(bench, BETA)
    (bench / "raw").mkdir()
    (bench / "raw" / "pde.json").write_text('{"meta": {}, "results": []}')     # raw output: not a record, ignored
    before, after = "# Project\n\nintro text\n\n", "\n\n## Next\n\nthe rest, untouched\n"
    readme = tmp_path / "README.md"
    readme.write_text(before + f"{tool.BEGIN}\nold figures\n{tool.END}" + after)
    doc = tmp_path / "docs" / "performance.md"
    args = ["--benchmarks", str(bench), "--doc", str(doc), "--readme", str(readme)]

    assert tool.main(args) == 0
    text = doc.read_text()
    assert "| run | machine | GPU | commit | date | command | value |" in text
    assert ("| 1 GPU | one host with 2 NVIDIA H200, 32 cores | NVIDIA H200 | `0123abc` | 2026-11-28 | "
            "`cardiosim bench table41 --ranks 1` | step **12.5 ms**; cells 3.25 ms |") in text
    assert ("| 2 GPUs | one host with 2 NVIDIA H200, 32 cores | NVIDIA H200 | `0123abc` | 2026-11-28 | "
            "`cardiosim bench table41 --ranks 2` | step **7.75 ms** |") in text
    assert "| 2 GPUs, again | one host with 2 NVIDIA H200, 32 cores | NVIDIA H200 | `0123abc` | 2026-11-28 | as above |" in text
    assert "| peer code (reference) | one NVIDIA H100 | NVIDIA H100 | — | — | — | rate **2.2·10⁹ cell-steps/s** |" in text
    assert "- 1 GPU: one round" in text and "- peer code: as the peer's paper quotes it" in text
    assert text.index("## Alpha sheet") < text.index("## Beta kernel")            # the README's cases first
    assert "pde" not in text.split("The cases:")[1]

    new = readme.read_text()
    assert new.startswith(before) and new.endswith(after)
    assert f"{tool.BEGIN}\n- Alpha: 7.75 ms on two, 3.25 ms of cells on one.\n{tool.END}" in new

    assert tool.main(args + ["--check"]) == 0
    ALPHA2 = json.loads(json.dumps(ALPHA))
    ALPHA2["records"][1]["values"][0]["value"] = 7.25
    _write(bench, ALPHA2)
    assert tool.main(args + ["--check"]) == 1
    assert "7.25 ms" not in doc.read_text()                                       # --check writes nothing
    assert tool.main(args) == 0 and "7.25 ms on two" in readme.read_text()


def test_readme_without_markers_is_left_alone(tmp_path):
    tool = _tool()
    _write(tmp_path / "b", ALPHA)
    readme = tmp_path / "README.md"
    readme.write_text(f"no markers here\n{tool.BEGIN}\nonly the first one\n")
    assert tool.main(["--benchmarks", str(tmp_path / "b"), "--doc", str(tmp_path / "p.md"),
                      "--readme", str(readme)]) == 0
    assert readme.read_text() == f"no markers here\n{tool.BEGIN}\nonly the first one\n"


@pytest.mark.parametrize("change, message", [
    (lambda c: c["records"][0].pop("machine"), "missing field(s) machine"),
    (lambda c: c["records"][0].update(commit="not-a-hash"), "commit: expected a git hash"),
    (lambda c: c["records"][0].update(command=None), "command: expected a non-empty string"),
    (lambda c: c["records"][0].update(date="28 Nov"), "date: expected YYYY-MM-DD"),
    (lambda c: c["records"][0]["values"][0].pop("unit"), "expected exactly the fields name, value, unit"),
    (lambda c: c.update(case="other"), "is not the file's name"),
    (lambda c: c["records"][0].update(comit="0123abc"), "unknown field(s) comit"),
    (lambda c: c["readme"].update(line="{3 GPUs}"), "no record labelled '3 GPUs'"),
])
def test_a_bad_record_is_named(tmp_path, capsys, change, message):
    tool = _tool()
    case = json.loads(json.dumps(ALPHA))
    change(case)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "alpha.json").write_text(json.dumps(case))
    assert tool.main(["--benchmarks", str(tmp_path / "b"), "--doc", str(tmp_path / "p.md"),
                      "--readme", str(tmp_path / "none.md")]) == 2
    err = capsys.readouterr().err
    assert "alpha.json" in err and message in err
    assert not (tmp_path / "p.md").exists()


def test_benchmarks_folder_has_records():
    assert len(RECORDS) >= 5, "benchmarks/*.json: the records of the benchmark cases"


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_every_record_has_the_required_fields(path):
    case = json.loads(path.read_text())
    assert {"case", "title", "measures", "records"} <= case.keys() and case["case"] == path.stem
    for rec in case["records"]:
        missing = [k for k in REQUIRED if k not in rec]
        assert not missing, f"{path.name}: {rec.get('label')}: no {', '.join(missing)}"
        assert rec["values"] and all({"name", "value", "unit"} == v.keys() for v in rec["values"])
        assert rec["machine"] and rec["gpu"]
        if rec.get("reference"):
            assert rec.get("source"), f"{path.name}: {rec['label']}: a reference says where it comes from"
        else:
            assert rec["command"] and re.fullmatch(r"\d{4}-\d\d-\d\d", rec["date"]), rec["label"]
    _tool().validate(case, path)


def test_performance_page_is_current():
    tool = _tool()
    cases = tool.load(ROOT / "benchmarks")
    page = (ROOT / "docs" / "performance.md").read_text()
    assert page == tool.render_doc(cases), "regenerate: make performance"
    readme = (ROOT / "README.md").read_text()
    block = tool.rewrite_readme(readme, tool.render_readme_block(cases))
    if block is not None:
        assert block == readme, "README.md's performance block: regenerate with make performance"


def _flags(words):
    out = []
    for w in words:
        if w == "--":                    # PETSc options from here on
            break
        if w.startswith("--"):
            out.append(w.split("=", 1)[0])
    return out


def _problems(command: str) -> list[str]:
    """What in ``command`` this tree does not have: a script, a config, a bench, a make target, an option."""
    bad = []
    source = "\n".join(p.read_text() for p in (ROOT / "cardiosim").rglob("*.py"))
    for part in command.split("; "):
        words = shlex.split(part)
        while words and re.fullmatch(r"[A-Z_]+=.*", words[0]):            # VAR=value prefixes
            words = words[1:]
        if words[:1] == ["bash"]:
            if not (ROOT / words[1]).is_file():
                bad.append(f"no {words[1]}")
            if words[1] == "tools/ab-trees.sh":
                bad += _problems(shlex.join(words[2:]))
            continue
        if words[:3] == ["python3", "-m", "cardiosim"]:
            words = ["cardiosim"] + words[3:]
        if words[:1] == ["python3"]:
            script = ROOT / words[1]
            if not script.is_file():
                bad.append(f"no {words[1]}")
            else:
                bad += [f"{words[1]}: no {f}" for f in _flags(words[2:]) if f'"{f}"' not in script.read_text()]
        elif words[:1] == ["make"]:
            if not re.search(rf"^{re.escape(words[1])}:", (ROOT / "Makefile").read_text(), re.M):
                bad.append(f"no make target {words[1]}")
        elif words[:2] == ["cardiosim", "bench"]:
            module = ROOT / "cardiosim" / "bench" / (words[2].replace("-", "_") + ".py")
            if not module.is_file():
                bad.append(f"no benchmark {words[2]}")
                continue
            text = module.read_text()
            bad += [f"bench {words[2]}: no {f}" for f in _flags(words[3:]) if f'"{f}"' not in text]
            if words[2] == "scaling" and not (ROOT / words[3]).is_file():
                bad.append(f"no {words[3]}")
        elif words[:1] == ["cardiosim"]:
            if words[1] == "run" and not (ROOT / words[2]).is_file():
                bad.append(f"no {words[2]}")
            bad += [f"cardiosim {words[1]}: no {f}" for f in _flags(words[2:]) if f'"{f}"' not in source]
            if "--model" in words and not (ROOT / words[words.index("--model") + 1]).is_file():
                bad.append(f"no {words[words.index('--model') + 1]}")
        else:
            bad.append(f"not a command of this tree: {part}")
    return bad


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: p.name)
def test_commands_exist_in_this_tree(path):
    for rec in json.loads(path.read_text())["records"]:
        if rec.get("command"):
            assert not _problems(rec["command"]), f"{path.name}: {rec['label']}: {_problems(rec['command'])}"
