"""`cardiosim cell`: the single-cell command, its JSON output and its bad-input lines."""

import json

import pytest

from conftest import run_cli


def test_cell_command_reproduces_beat_one(tmp_path):
    out, js = tmp_path / "cell.h5", tmp_path / "cell.json"
    proc = run_cli(["cell", "--model", "bondarenko", "--variant", "apical", "--period", "100",
                    "--output", out, "--json", js], check=True)
    print(proc.stdout)
    beat = json.loads(js.read_text())["beats"][0]
    assert beat["V_peak"] == pytest.approx(33.02, abs=0.5)          # spec.md §6
    assert beat["APD90"] == pytest.approx(22.79, rel=0.01)
    assert out.exists()


@pytest.mark.parametrize("args,words", [
    (["--dt", "-1"], ["dt"]),
    (["--model", "tt06", "--variant", "septal"], ["variant", "tt06"]),
    (["--param", "g_Kur"], ["--param", "NAME=NUMBER"]),
    (["--param", "g_Kxx=1"], ["g_Kxx", "allowed"]),
    (["--model", "nosuch"], ["nosuch", "allowed"]),
])
def test_cell_bad_input(tmp_path, args, words):
    out = tmp_path / "cell.h5"
    proc = run_cli(["cell", *args, "--output", out])
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1, proc.stderr
    assert all(w in lines[0] for w in words), lines[0]
    assert not out.exists()
