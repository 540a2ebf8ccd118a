"""oomcast.track(): on a machine with a GPU, records the real run's memory at named
checkpoints (allocated, reserved, and the peaks of both since the previous checkpoint, as
torch.cuda reports them) and prints it beside the prediction for the same checkpoints (the
Prediction's phases of that name), so predicted and real are seen side by side. Refuses to
start without a GPU. torch is imported when a track starts, not with the package."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, List, Optional, TextIO

from ._results import Prediction

_MIB = 1024.0 * 1024.0


@dataclass(frozen=True)
class Measured:
    """The real allocator at one checkpoint."""
    name: str
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int  # since the previous checkpoint (or the start of the block)
    peak_reserved_bytes: int   # since the previous checkpoint (or the start of the block)


class track:
    """``with oomcast.track(prediction) as t: ...; t.checkpoint("iter0/forward") ...``

    Names that match the prediction's phases (``iter0/forward``, ``iter0/backward``, ...) are
    printed beside its numbers when the block ends (to ``out``, default stderr); ``t.rows``
    holds what was measured. ``cuda`` is the memory API read (default ``torch.cuda``; any
    object with its is_available, synchronize, memory_allocated, memory_reserved,
    max_memory_allocated, max_memory_reserved and reset_peak_memory_stats)."""

    def __init__(self, prediction: Optional[Prediction] = None, device: Any = None,
                 out: Optional[TextIO] = None, cuda: Any = None) -> None:
        if cuda is None:
            import torch  # here, not at import: `import oomcast` stays light
            cuda = torch.cuda
        if not cuda.is_available():
            raise RuntimeError("oomcast.track records real CUDA memory and this process sees no GPU "
                               "(torch.cuda.is_available() is False); use oomcast.plan for the prediction alone")
        self._cuda = cuda
        self.prediction = prediction
        self.device = device
        self.out = out
        self.rows: List[Measured] = []

    def __enter__(self) -> "track":
        self._cuda.synchronize(self.device)
        self._cuda.reset_peak_memory_stats(self.device)
        return self

    def checkpoint(self, name: str) -> Measured:
        """Records the allocator now (after the device's queued work) and starts a new peak."""
        cuda = self._cuda
        cuda.synchronize(self.device)
        row = Measured(name, cuda.memory_allocated(self.device), cuda.memory_reserved(self.device),
                       cuda.max_memory_allocated(self.device), cuda.max_memory_reserved(self.device))
        cuda.reset_peak_memory_stats(self.device)
        self.rows.append(row)
        return row

    def table(self) -> str:
        """The checkpoints, real beside predicted, in MiB ('-' where the prediction has no phase of that name)."""
        phases = {p.name: p for p in (self.prediction.phases if self.prediction else [])}
        columns = ["alloc", "resv", "peak al", "peak rs"]
        lines = [f"{'checkpoint':<24} " + " ".join(f"{'real ' + c:>12}" for c in columns) + " " +
                 " ".join(f"{'pred ' + c:>12}" for c in columns) + "   (MiB)"]
        for row in self.rows:
            real = (row.allocated_bytes, row.reserved_bytes, row.peak_allocated_bytes, row.peak_reserved_bytes)
            phase = phases.get(row.name)
            predicted = ((phase.allocated_bytes, phase.reserved_bytes, phase.peak_allocated_bytes,
                          phase.peak_reserved_bytes) if phase else None)
            cells = [f"{v / _MIB:>12.1f}" for v in real]
            cells += [f"{v / _MIB:>12.1f}" for v in predicted] if predicted else [f"{'-':>12}"] * 4
            lines.append(f"{row.name:<24} " + " ".join(cells))
        return "\n".join(lines) + "\n"

    def __exit__(self, *exc: Any) -> None:
        (self.out or sys.stderr).write(self.table())
