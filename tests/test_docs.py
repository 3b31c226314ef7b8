"""The references generated from the code must not drift: the config keys (docs/user/config.md, from the schema)
and the command line (docs/reference/cli.md, from the parsers)."""

import importlib
import re
from pathlib import Path

import pytest

from cardiosim import cli, config
from cardiosim.cli import reference
from cardiosim.cli.bench import BENCHMARKS

CLI_DOC = Path(__file__).resolve().parents[1] / "docs" / "reference" / "cli.md"


def test_config_reference_is_current():
    doc = Path(__file__).resolve().parents[1] / "docs" / "user" / "config.md"
    assert doc.read_text() == config.reference_markdown(), "regenerate: cardiosim config --doc > docs/user/config.md"


def test_cli_reference_is_current():
    assert CLI_DOC.read_text() == cli.reference_markdown(), "regenerate: cardiosim --doc > docs/reference/cli.md"


def test_cli_reference_does_not_depend_on_the_terminal(monkeypatch):
    """argparse wraps at the terminal's width (COLUMNS); the page at its own."""
    pages = []
    for columns in ("40", "250"):
        monkeypatch.setenv("COLUMNS", columns)
        pages.append(cli.reference_markdown())
    assert pages[0] == pages[1]


def _options(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w-])--[a-z][\w-]*", text)) - {"--help"}


@pytest.mark.parametrize("name", BENCHMARKS)
def test_cli_reference_has_each_benchmarks_options(name, capsys, monkeypatch):
    """The page reads a benchmark's parser by stopping its main where it parses: its section holds the options that
    ``cardiosim bench NAME --help`` prints."""
    monkeypatch.setenv("COLUMNS", "1000")        # no option name broken at a hyphen
    with pytest.raises(SystemExit):
        importlib.import_module(BENCHMARKS[name]).main(["--help"])
    shown = _options(capsys.readouterr().out)
    page = cli.reference_markdown()
    section = re.split(r"\n##+ ", page.split(f"### `cardiosim bench {name}`\n", 1)[1], maxsplit=1)[0]
    assert shown and _options(section) == shown


def test_cli_reference_has_every_verb_and_option(monkeypatch):
    """Each verb's section holds the options its --help prints (sweep's and bench's parse their own words)."""
    monkeypatch.setenv("COLUMNS", "1000")        # no option name broken at a hyphen
    page = cli.reference_markdown()
    for verb in cli.COMMANDS:
        section = re.split(r"\n## ", page.split(f"## `cardiosim {verb}`\n", 1)[1], maxsplit=1)[0]
        module = cli.command(verb)
        if verb == "bench":
            assert all(f"### `cardiosim bench {name}`" in section for name in BENCHMARKS)
            continue
        parser = module.parser() if verb == "sweep" else reference.subparsers(cli.parser())[verb][0]
        assert _options(section) == _options(parser.format_help()), verb


def test_every_shipped_config_is_valid():
    """Every config under run/, in subfolders too (run/niederer/*.toml), and the test configs."""
    root = Path(__file__).resolve().parents[1]
    paths = sorted((root / "run").rglob("*.toml")) + sorted((root / "tests" / "configs").rglob("*.toml"))
    assert len([p for p in paths if p.parent.name == "niederer"]) == 9
    # run/lv-ecg.toml reads files the tutorial makes first (cardiosim geometry lv ...): tests/test_tutorial.py makes
    # them and runs it; run/biv-ecg.toml reads out/biv.h5 (cardiosim geometry biv ...): tests/test_fibres.py makes it;
    # run/human-biv.toml reads out/human-biv.h5 (10^7 tissue nodes): tests/test_human_biv.py runs it on a coarse one;
    # run/biv-purkinje.toml and run/biv-lbbb.toml read out/biv-1mm.h5: tests/test_purkinje_biv.py makes one and runs them
    for path in paths:
        if path.name not in ("lv-ecg.toml", "biv-ecg.toml", "human-biv.toml", "biv-purkinje.toml", "biv-lbbb.toml"):
            config.load(path)


def test_every_file_the_docs_and_code_name_exists():
    """A newcomer follows the paths README.md, docs/ and the code's comments give (a module, a config, a kernel, a
    page): each must be there. benchmarks/raw/ is made by the bench targets; VERB, a.py, b.py are placeholders."""
    import re
    root = Path(__file__).resolve().parents[1]
    path = re.compile(r"(?<![\w/.])((?:cardiosim|kernels|tests|tools|run|docs|models|benchmarks)/[\w./-]*?"
                      r"\.(?:md|py|toml|sh|h|cu|c|cpp|inc|json|cellml|h5))(?![\w.-])")
    texts = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    texts += [p for d in ("cardiosim", "kernels", "tools") for p in sorted((root / d).rglob("*"))
              if p.suffix in (".py", ".h", ".cu", ".c", ".cpp", ".inc", ".sh") and "__pycache__" not in p.parts]
    missing = set()
    for text in texts:
        for name in path.findall(text.read_text(errors="replace")):
            if name.startswith("benchmarks/raw/") or Path(name).stem in ("VERB", "a", "b"):
                continue
            if not (root / name).exists():
                missing.add(f"{text.relative_to(root)}: {name}")
    assert not missing, "\n".join(sorted(missing))
