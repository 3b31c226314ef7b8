"""The config reference in docs/ is generated from the schema; it must not drift."""

from pathlib import Path

from cardiosim import config


def test_config_reference_is_current():
    doc = Path(__file__).resolve().parents[1] / "docs" / "config.md"
    assert doc.read_text() == config.reference_markdown(), "regenerate: cardiosim config --doc > docs/config.md"


def test_demo_config_is_valid():
    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "run").glob("*.toml")):
        config.load(path)
