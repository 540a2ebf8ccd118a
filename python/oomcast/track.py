"""oomcast.track(): on a machine with a GPU, records the real run's memory at named
checkpoints (allocated, reserved, peak since the previous checkpoint, as torch.cuda reports
them) and prints it beside the prediction for the same checkpoints (the Prediction's phases of
that name), so predicted and real are seen side by side. Refuses to start without a GPU."""
from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, List, Optional, TextIO

from ._results import Prediction


@dataclass(frozen=True)
class Measured:
    """The real allocator at one checkpoint."""
    name: str
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int  # since the previous checkpoint


class track:
    """``with oomcast.track(prediction) as t: ...; t.checkpoint("iter0/forward") ...``

    Names that match the prediction's phases (``iter0/forward``, ``iter0/backward``, ...) are
    printed beside its numbers when the block ends (to ``out``, default stderr)."""

    def __init__(self, prediction: Optional[Prediction] = None, device: Any = None,
                 out: Optional[TextIO] = None) -> None:
        import torch
        if not torch.cuda.is_available():
            raise RuntimeError("oomcast.track records real CUDA memory and this process sees no GPU "
                               "(torch.cuda.is_available() is False); use oomcast.plan for the prediction alone")
        self._torch = torch
        self.prediction = prediction
        self.device = device
        self.out = out
        self.rows: List[Measured] = []

    def __enter__(self) -> "track":
        self._torch.cuda.reset_peak_memory_stats(self.device)
        return self

    def checkpoint(self, name: str) -> Measured:
        cuda = self._torch.cuda
        cuda.synchronize(self.device)
        row = Measured(name, cuda.memory_allocated(self.device), cuda.memory_reserved(self.device),
                       cuda.max_memory_allocated(self.device))
        cuda.reset_peak_memory_stats(self.device)
        self.rows.append(row)
        return row

    def table(self) -> str:
        phases = {p.name: p for p in (self.prediction.phases if self.prediction else [])}
        mib = 1024.0 * 1024.0
        lines = [f"{'checkpoint':<24} {'real alloc':>12} {'real resv':>12} {'real peak':>12} "
                 f"{'pred alloc':>12} {'pred resv':>12} {'pred peak':>12}   (MiB)"]
        for row in self.rows:
            phase = phases.get(row.name)
            predicted = (f"{phase.allocated_bytes / mib:>12.1f} {phase.reserved_bytes / mib:>12.1f} "
                         f"{phase.peak_allocated_bytes / mib:>12.1f}") if phase else f"{'-':>12} {'-':>12} {'-':>12}"
            lines.append(f"{row.name:<24} {row.allocated_bytes / mib:>12.1f} {row.reserved_bytes / mib:>12.1f} "
                         f"{row.peak_allocated_bytes / mib:>12.1f} {predicted}")
        return "\n".join(lines) + "\n"

    def __exit__(self, *exc: Any) -> None:
        (self.out or sys.stderr).write(self.table())
