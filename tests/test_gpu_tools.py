"""tools/gpu/fresh-clone-setup.sh, the GPU proof's driver, run here with stand-ins for make, python3 and the
venv it builds: the pipeline starts detached, each call shows what happened and exits 0 (done), 1 (failed),
3 (running: call again) or 4 (not started: what is missing); the summary and at most 8 files go to $OUT. What it
drives (make setup, make test-gpu, make run) is tested elsewhere; a GPU node runs it for real."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import ROOT

SCRIPT = ROOT / "tools" / "gpu" / "fresh-clone-setup.sh"

# make: record the call; `setup` makes the venv's cardiosim; `test-gpu` passes (or fails where FAIL_TESTS is set);
# `run` writes the output. SETUP_SLEEP makes the set-up take that long.
MAKE = r"""#!/bin/bash
echo "make $*" >> "$CALLS"
src=$2
case " $* " in
  *" setup "*) sleep "${SETUP_SLEEP:-0}"; mkdir -p "$src/.venv/bin"
               printf '#!/bin/bash\necho "cardiosim $*"; echo "verdict  ok"\n' > "$src/.venv/bin/cardiosim"
               chmod +x "$src/.venv/bin/cardiosim"; echo "[bootstrap   1s] GPU: yes (stand-in)" ;;
  *" test-gpu "*) [ -n "${FAIL_TESTS:-}" ] && { echo "===== 1 failed, 2 passed in 1.0s ====="; exit 1; }
                  echo "===== 3 passed in 1.0s =====" ;;
  *" run "*) mkdir -p "$src/out"; echo run > "$src/out/gpu-resident.h5"; echo "timing table" ;;
esac
"""


def _checkout(tmp_path: Path, core=True) -> Path:
    """A small checkout with the script, two GPU test files and (``core``) a carried wheelhouse."""
    repo = tmp_path / "repo"
    (repo / "tools" / "gpu").mkdir(parents=True)
    shutil.copy(SCRIPT, repo / "tools" / "gpu" / SCRIPT.name)
    (repo / "tests").mkdir()
    for name in ("test_a_gpu.py", "test_b_gpu.py", "test_c.py", "test_d_gpu.py", "test_e_gpu.py", "test_f_gpu.py"):
        marked = "pytestmark = pytest.mark.gpu\n" if "gpu" in name else ""
        (repo / "tests" / name).write_text(f"import pytest\n{marked}")
    if core:
        wheels = repo / ".dev" / "gpu-wheelhouse" / "core"
        wheels.mkdir(parents=True)
        (wheels / "petsc-3.26.1.tar.gz").write_bytes(b"")
    return repo


def _call(tmp_path, repo, wait=60, **env):
    bin_ = tmp_path / "bin"
    bin_.mkdir(exist_ok=True)
    (bin_ / "make").write_text(MAKE)
    (bin_ / "python3").write_text("#!/bin/bash\nexit 0\n")       # the image's numpy, scipy, ... are "there"
    for p in bin_.iterdir():
        p.chmod(0o755)
    out = tmp_path / "OUT"
    out.mkdir(exist_ok=True)
    full = dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", WORK=str(tmp_path / "work"),
                WAIT=str(wait), OUT=str(out), CALLS=str(tmp_path / "calls.log"), **env)
    return subprocess.run(["bash", str(repo / "tools" / "gpu" / SCRIPT.name)], env=full, capture_output=True,
                          text=True, timeout=120)


def test_valid_bash():
    """Every device script parses (they run only on a GPU machine, where a syntax error costs a call)."""
    scripts = sorted((ROOT / "tools" / "gpu").glob("*.sh"))
    assert SCRIPT in scripts and len(scripts) > 2
    for script in scripts:
        assert subprocess.run(["bash", "-n", str(script)]).returncode == 0, script.name


def test_whole_pipeline(tmp_path):
    repo = _checkout(tmp_path)
    proc = _call(tmp_path, repo)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "started:" in proc.stdout and "verdict: every step passed" in proc.stdout
    calls = (tmp_path / "calls.log").read_text().splitlines()
    src = tmp_path / "work" / "src"
    assert calls[0] == f"make -C {src} setup"
    tests = [c.split("TESTS=")[1].split() for c in calls if " test-gpu " in c]
    assert len(tests) == 4                                      # TEST_RUNS: four runs side by side
    assert sorted(f for t in tests for f in t) == [f"tests/test_{x}_gpu.py" for x in "abdef"]    # each file once
    assert calls[-1] == f"make -C {src} run CONFIG=run/gpu-resident.toml NP=1"
    assert not (src / ".dev").exists()                  # the copy holds nothing carried or built
    assert (tmp_path / "work" / "wheelhouse" / "petsc-3.26.1.tar.gz").exists()
    back = sorted(p.name for p in (tmp_path / "OUT").iterdir())
    assert "summary.txt" in back and "setup.log" in back and len(back) <= 8
    # called again after the end: the same summary, nothing run again
    again = _call(tmp_path, repo)
    assert again.returncode == 0 and "verdict: every step passed" in again.stdout
    assert (tmp_path / "calls.log").read_text().splitlines() == calls


def test_failed_tests_fail_the_verdict(tmp_path):
    proc = _call(tmp_path, _checkout(tmp_path), FAIL_TESTS="1")
    assert proc.returncode == 1 and "verdict: FAILED" in proc.stdout, proc.stdout
    assert "1 failed, 2 passed" in proc.stdout


def test_still_running_then_done(tmp_path):
    repo = _checkout(tmp_path)
    first = _call(tmp_path, repo, wait=0, SETUP_SLEEP="4")
    assert first.returncode == 3 and "call again at once" in first.stdout, first.stdout + first.stderr
    second = _call(tmp_path, repo, wait=60)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "started:" not in second.stdout           # one pipeline, not two
    assert len([c for c in (tmp_path / "calls.log").read_text().splitlines() if c.endswith(" setup")]) == 1


def test_not_started_without_the_wheelhouse(tmp_path):
    proc = _call(tmp_path, _checkout(tmp_path, core=False))
    assert proc.returncode == 4 and "carry .dev/gpu-wheelhouse/core" in proc.stdout
    assert not (tmp_path / "calls.log").exists()


def test_not_started_where_the_image_lacks_a_package(tmp_path):
    repo = _checkout(tmp_path)
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (bin_ / "python3").write_text('#!/bin/bash\n[[ "$2" == *scipy* ]] && exit 1; exit 0\n')
    (bin_ / "python3").chmod(0o755)
    full = dict(os.environ, PATH=f"{bin_}{os.pathsep}{os.environ['PATH']}", WORK=str(tmp_path / "work"), WAIT="5",
                CALLS=str(tmp_path / "calls.log"))
    proc = subprocess.run(["bash", str(repo / "tools" / "gpu" / SCRIPT.name)], env=full, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 4 and "lacks scipy" in proc.stdout and "gpu-wheelhouse/extra" in proc.stdout
