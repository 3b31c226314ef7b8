"""tools/gpu/myokit_peer.py, the peer of the throughput table (Myokit's own CUDA kernel), on the CPU: the exported
source is the FP64 one our throughput table needs (Myokit's template hard-codes FP32, the tool swaps one line of its
own copy), carries our loop around Myokit's step, and compiles where nvcc is on PATH. The timing itself runs on a GPU
node."""

from __future__ import annotations

import importlib.util
import re
import shutil

import pytest

from conftest import ROOT

pytest.importorskip("myokit")


def _peer():
    spec = importlib.util.spec_from_file_location("myokit_peer", ROOT / "tools" / "gpu" / "myokit_peer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_peer_source_is_double_precision_with_our_loop():
    peer = _peer()
    cu, y0 = peer.source(peer.MODELS["tt06"])
    assert "typedef double Real;" in cu and "typedef float Real;" not in cu
    assert not re.search(r"\bexpf\(|\d+\.\d+(?:e[-+]?\d+)?f\b", cu), "single-precision literals or calls left"
    assert "__device__ int iterate_euler_cu(" in cu and "peer_euler" in cu
    assert len(y0) == 19                                      # TT06's states, its resting V among them
    assert any(-90 < y < -80 for y in y0)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not on PATH (the GPU node compiles it)")
def test_peer_compiles(capsys):
    assert _peer().compile_only(["tt06", "bondarenko"], "sm_90") == 0
    assert "nvcc exit 0" in capsys.readouterr().out
