"""CARDIOSIM_REQUIRE (tests/conftest.py): a capability a test needs and the run requires is a failure naming what is
missing, not a skip; so `make test-gpu` on a machine without a usable GPU fails instead of passing empty."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import ROOT


def pytest_run(*args, require: str | None = None):
    env = dict(os.environ)
    env.pop("CARDIOSIM_REQUIRE", None)
    if require is not None:
        env["CARDIOSIM_REQUIRE"] = require
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, env=env)


def test_missing_gpu_fails_where_required():
    from cardiosim.reaction.placement import visible_gpus
    n, why = visible_gpus()
    if n:
        pytest.skip("a GPU is visible here: the no-GPU case cannot be shown")   # not a missing capability
    test = "tests/test_cuda_tissue.py"
    skipped = pytest_run("-m", "gpu", test)
    assert skipped.returncode == 0 and "skipped" in skipped.stdout and "failed" not in skipped.stdout, skipped.stdout
    failed = pytest_run("-m", "gpu", test, require="gpu,mpi")
    print("\n" + failed.stdout[-600:])
    assert failed.returncode == 1 and "passed" not in failed.stdout.splitlines()[-1]
    assert "required capability 'gpu' is missing (CARDIOSIM_REQUIRE)" in failed.stdout
    assert why in failed.stdout                      # says what is missing: no PyCUDA, no driver, no device


def test_unknown_capability_is_a_usage_error():
    proc = pytest_run("tests/test_docs.py", require="gpu,mpj")
    assert proc.returncode == 4 and "unknown capability mpj" in proc.stdout + proc.stderr


def test_requiring_gpus_with_no_gpu_test_selected_is_an_error():
    proc = pytest_run("-m", "not gpu", "tests/test_docs.py", require="gpu")
    assert proc.returncode == 4 and "no GPU test is selected" in proc.stdout + proc.stderr
