"""Typed results of the Python API. Each is read from the JSON the C++ core renders for the
matching CLI command (`plan --json`, `replay --json`, ...), so the numbers are the CLI's; the
whole document stays available as ``.json``."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional


@dataclass(frozen=True)
class Phase:
    """One row of the report's checkpoint table: the allocator at a phase mark of the step."""
    name: str
    iteration: int
    allocated_bytes: int
    reserved_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int


@dataclass(frozen=True)
class Prediction:
    """What `oomcast plan` predicts for one scenario."""
    fits: bool
    device: str
    usable_bytes: int
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    spare_bytes: int
    memory_stats: Dict[str, int]           # torch.cuda.memory_stats() keys, at the end of the step
    phases: List[Phase]
    breakdown: Dict[str, int]              # live bytes per category at the allocated peak
    oom_message: Optional[str]             # PyTorch's exact text; None when it fits
    step_seconds: Optional[float]          # one optimizer step on the device; None when not modelled
    json: Dict[str, Any] = field(repr=False)  # the whole `plan --json` document
    _core: Any = field(repr=False, compare=False, default=None)

    @classmethod
    def from_core(cls, core: Any) -> "Prediction":
        doc = json.loads(core.json())
        step = doc.get("step_time") or {}
        return cls(fits=doc["fits"], device=doc["device"], usable_bytes=doc["usable_bytes"],
                   peak_allocated_bytes=doc["peak_allocated_bytes"], peak_reserved_bytes=doc["peak_reserved_bytes"],
                   spare_bytes=doc["spare_bytes"], memory_stats=dict(doc.get("memory_stats") or {}),
                   phases=[Phase(**{k: row[k] for k in Phase.__dataclass_fields__}) for row in doc["phases"]],
                   breakdown=dict(doc.get("breakdown") or {}), oom_message=doc.get("oom_message"),
                   step_seconds=step.get("step_seconds") if step.get("modelled") else None, json=doc, _core=core)

    def report(self) -> str:
        """The text report `oomcast plan` prints."""
        return str(self._core.text())

    def to_html(self, path: str) -> str:
        """Writes the HTML page `oomcast plan --html` writes; returns the path."""
        self._core.write_html(str(path))
        return str(path)

    def to_snapshot(self, path: str) -> str:
        """Writes the simulated run as a torch.cuda.memory._snapshot() pickle (.pickle or
        .pickle.gz), as `plan --export-snapshot` does; returns the path."""
        self._core.write_snapshot(str(path))
        return str(path)

    def _repr_html_(self) -> str:
        return str(self._core.html())

    def __str__(self) -> str:
        return self.report()


@dataclass(frozen=True)
class ReplayResult:
    """What `oomcast replay` says of a snapshot or trace replayed through the simulator."""
    peak_allocated_bytes: int
    peak_reserved_bytes: int
    fragmentation_at_peak_bytes: int
    oom_message: Optional[str]
    memory_stats: Dict[str, int]
    reproduced: Optional[bool]             # a snapshot: every recorded segment decision reproduced
    json: Dict[str, Any] = field(repr=False)

    @classmethod
    def from_json(cls, text: str) -> "ReplayResult":
        doc = json.loads(text)
        recorded = doc.get("recorded")
        return cls(peak_allocated_bytes=doc["peak_allocated_bytes"], peak_reserved_bytes=doc["peak_reserved_bytes"],
                   fragmentation_at_peak_bytes=doc["fragmentation_at_peak_bytes"], oom_message=doc["oom_message"],
                   memory_stats=dict(doc["memory_stats"]),
                   reproduced=None if recorded is None else recorded["first_mismatch"] is None, json=doc)

    @property
    def fits(self) -> bool:
        return self.oom_message is None


@dataclass(frozen=True)
class SearchResult:
    """What `oomcast search` finds: the largest value that fits (None when none does)."""
    best: Optional[int]
    json: Dict[str, Any] = field(repr=False)
    text: str = field(repr=False, default="")

    def report(self) -> str:
        return self.text


@dataclass(frozen=True)
class WhatifResult:
    """What `oomcast whatif` says: the OOM patterns and the simulated fixes, best first."""
    fits: bool
    patterns: List[Dict[str, Any]]
    fixes: List[Dict[str, Any]]
    json: Dict[str, Any] = field(repr=False)
    text: str = field(repr=False, default="")

    def report(self) -> str:
        return self.text
