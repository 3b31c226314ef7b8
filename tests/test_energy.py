"""GPU energy accounting (cardiosim.runtime.energy) where there is no GPU or no NVML: the run says why instead of giving
numbers. On a GPU node tests/test_resident_gpu.py checks that a resident run reports joules."""

from mpi4py import MPI

from cardiosim.runtime import energy


def test_no_gpu_gives_a_reason_not_numbers():
    m = energy.Meter([])
    assert not m.available and m.read() is None and m.why == "no GPU in this run"
    e = energy.summary(MPI.COMM_SELF, m, None, None, None, 1.0, 10)
    assert e == {"available": False, "why": "no GPU in this run"}
    assert energy.line(e) == "GPU energy: not measured (no GPU in this run)"


def test_a_summary_adds_the_segments():
    class Fake(energy.Meter):
        def __init__(self):
            self.handles, self.why = [object()], None
    e = energy.summary(MPI.COMM_SELF, Fake(), 100.0, 130.0, 430.0, 2.0, 100)
    assert e["available"] and e["gpus"] == 1
    assert (e["setup_j"], e["loop_j"], e["loop_mean_power_w"], e["loop_j_per_step"]) == (30.0, 300.0, 150.0, 3.0)
    assert "300.0 J" in energy.line(e)


def test_a_counter_that_stops_answering_is_reported_missing_not_zero():
    class Broken(energy.Meter):
        def __init__(self):
            self.handles, self.why = [object()], None

        def read_mj(self, handle):
            raise RuntimeError("GPU lost")
    m = Broken()
    assert m.read() is None and not m.available and "stopped answering" in m.why
    e = energy.summary(MPI.COMM_SELF, m, 1.0, None, None, 1.0, 10)
    assert not e["available"] and "GPU lost" in e["why"]
