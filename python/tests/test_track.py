"""oomcast.track without a GPU: what it records at each checkpoint and how it sets the real
numbers beside the prediction's phase of the same name, read from a stand-in for torch.cuda
(a counting allocator, no torch), and its refusal where torch sees no GPU."""
from __future__ import annotations

import io

import pytest

import oomcast

MIB = 1024 * 1024


class CountingCuda:
    """torch.cuda's memory API over a bump allocator: reserved grows in 2 MiB segments and is
    never released; the peaks are reset to the current values, as reset_peak_memory_stats does."""

    def __init__(self, available: bool = True) -> None:
        self.available = available
        self.allocated = self.reserved = self.peak_allocated = self.peak_reserved = 0
        self.synchronized = 0

    def malloc(self, size: int) -> None:
        self.allocated += size
        while self.reserved < self.allocated:
            self.reserved += 2 * MIB
        self.peak_allocated = max(self.peak_allocated, self.allocated)
        self.peak_reserved = max(self.peak_reserved, self.reserved)

    def free(self, size: int) -> None:
        self.allocated -= size

    def is_available(self) -> bool:
        return self.available

    def synchronize(self, device=None) -> None:
        self.synchronized += 1

    def memory_allocated(self, device=None) -> int:
        return self.allocated

    def memory_reserved(self, device=None) -> int:
        return self.reserved

    def max_memory_allocated(self, device=None) -> int:
        return self.peak_allocated

    def max_memory_reserved(self, device=None) -> int:
        return self.peak_reserved

    def reset_peak_memory_stats(self, device=None) -> None:
        self.peak_allocated, self.peak_reserved = self.allocated, self.reserved


def test_track_refuses_where_no_gpu_is_seen():
    with pytest.raises(RuntimeError, match="sees no GPU"):
        oomcast.track(None, cuda=CountingCuda(available=False))


def test_track_without_a_cuda_argument_reads_torch_and_refuses_without_a_gpu():
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("the refusal is for a machine without a GPU")
    with pytest.raises(RuntimeError, match="sees no GPU"):
        oomcast.track(None)


def test_each_checkpoint_records_the_allocator_and_the_peaks_since_the_previous_one():
    cuda = CountingCuda()
    cuda.malloc(5 * MIB)  # before the block: its peak is not the first checkpoint's
    cuda.free(5 * MIB)
    with oomcast.track(None, cuda=cuda, out=io.StringIO()) as t:
        cuda.malloc(100 * MIB)
        cuda.free(60 * MIB)
        first = t.checkpoint("forward")
        cuda.malloc(10 * MIB)
        second = t.checkpoint("backward")
    assert (first.allocated_bytes, first.peak_allocated_bytes) == (40 * MIB, 100 * MIB)
    assert (first.reserved_bytes, first.peak_reserved_bytes) == (100 * MIB, 100 * MIB)
    assert (second.allocated_bytes, second.peak_allocated_bytes) == (50 * MIB, 50 * MIB)
    assert t.rows == [first, second]
    assert cuda.synchronized == 3  # at the start and before each reading: queued kernels counted


def table_rows(text):
    """{checkpoint: [8 cells]} of the printed table (the header skipped)."""
    return {line.split()[0]: line.split()[1:] for line in text.splitlines()[1:]}


def test_the_printed_table_sets_each_phase_of_the_prediction_beside_the_real_numbers():
    prediction = oomcast.plan("scenarios/gpt2-tiny-cpu.yaml")
    phase = prediction.phases[-1]
    cuda = CountingCuda()
    out = io.StringIO()
    with oomcast.track(prediction, cuda=cuda, out=out) as t:
        cuda.malloc(3 * MIB)
        t.checkpoint(phase.name)
        t.checkpoint("not-a-phase")
        assert out.getvalue() == ""  # printed when the block ends
    rows = table_rows(out.getvalue())
    assert rows[phase.name][:4] == ["3.0", "4.0", "3.0", "4.0"]
    assert rows[phase.name][4:] == [f"{v / MIB:.1f}" for v in (phase.allocated_bytes, phase.reserved_bytes,
                                                              phase.peak_allocated_bytes, phase.peak_reserved_bytes)]
    assert rows["not-a-phase"][4:] == ["-"] * 4


def test_the_table_is_printed_when_the_block_raises():
    cuda = CountingCuda()
    out = io.StringIO()
    with pytest.raises(KeyError):
        with oomcast.track(None, cuda=cuda, out=out) as t:
            t.checkpoint("iter0/forward")
            raise KeyError("the step failed")
    assert "iter0/forward" in table_rows(out.getvalue())
