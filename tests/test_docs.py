"""The config reference in docs/user/ is generated from the schema; it must not drift."""

from pathlib import Path

from cardiosim import config


def test_config_reference_is_current():
    doc = Path(__file__).resolve().parents[1] / "docs" / "user" / "config.md"
    assert doc.read_text() == config.reference_markdown(), "regenerate: cardiosim config --doc > docs/user/config.md"


def test_every_shipped_config_is_valid():
    """Every config under run/, in subfolders too (run/niederer/*.toml), and the test configs."""
    root = Path(__file__).resolve().parents[1]
    paths = sorted((root / "run").rglob("*.toml")) + sorted((root / "tests" / "configs").rglob("*.toml"))
    assert len([p for p in paths if p.parent.name == "niederer"]) == 9
    # run/lv-ecg.toml reads files the tutorial makes first (cardiosim geometry lv ...): tests/test_tutorial.py makes
    # them and runs it; run/biv-ecg.toml reads out/biv.h5 (cardiosim geometry biv ...): tests/test_fibres.py makes it
    for path in paths:
        if path.name not in ("lv-ecg.toml", "biv-ecg.toml"):
            config.load(path)
