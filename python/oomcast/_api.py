"""plan, replay, search, sweep, whatif: the CLI's commands as functions. Each calls the C++
core (oomcast._core), which calls the library functions the CLI command calls."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Union

from . import _core
from ._results import Prediction, ReplayResult, SearchResult, WhatifResult
from ._scenario import ScenarioLike, scenario_arguments

Size = Union[str, int]  # "80GiB", "40GB", "512MiB", or a number of bytes


def plan(scenario: ScenarioLike, **overrides: Any) -> Prediction:
    """Predicts the memory of one scenario, as `oomcast plan SCENARIO --set key=value ...`.

    ``scenario`` is a path or a dict in the scenario format (docs/scenario-format.md);
    ``overrides`` are `--set` keys: ``plan("s.yaml", batch_size=16)``,
    ``plan(s, **{"allocator.expandable_segments": True})``. Bad input raises oomcast.InputError.
    Unlike the CLI, PYTORCH_CUDA_ALLOC_CONF in the environment is not read: set
    ``**{"allocator.conf": "..."}``.
    """
    path, text, sets = scenario_arguments(scenario, overrides)
    return Prediction.from_core(_core.plan(path, text, sets))


def _size_text(value: Optional[Size]) -> Optional[str]:
    if value is None:
        return None
    return f"{value}B" if isinstance(value, int) else str(value)


def replay(snapshot: Union[str, "os.PathLike[str]", Mapping[str, Any]], alloc_conf: Optional[str] = None,
           device_memory: Optional[Size] = None, context_memory: Optional[Size] = None,
           device_index: int = 0) -> ReplayResult:
    """Replays a snapshot or a trace through the allocator simulator, as `oomcast replay`.

    ``snapshot`` is a path (.pickle, .pickle.gz, or a trace file) or the dict
    ``torch.cuda.memory._snapshot()`` returned, replayed in this process. ``alloc_conf`` is a
    PYTORCH_CUDA_ALLOC_CONF string (a snapshot defaults to its recorded settings);
    ``device_memory`` asks where it would run out on a device of that size.
    """
    pickled: Optional[bytes] = None
    name = "<snapshot dict>"
    if isinstance(snapshot, Mapping):
        import io  # here, not at import: `import oomcast` stays light
        import pickle
        buffer = io.BytesIO()
        pickle.dump(dict(snapshot), buffer, protocol=4)  # what pickle.dump of a torch snapshot writes
        pickled = buffer.getvalue()
    elif isinstance(snapshot, (str, os.PathLike)):
        name = os.fspath(snapshot)
    else:
        raise TypeError(f"snapshot must be a path or the dict torch.cuda.memory._snapshot() returned, "
                        f"not {type(snapshot).__name__}")
    return ReplayResult.from_json(_core.replay(name, pickled, alloc_conf, _size_text(device_memory),
                                               _size_text(context_memory), device_index))


def _margin_text(margin: Union[str, float]) -> str:
    return margin if isinstance(margin, str) else repr(float(margin))


def search(scenario: ScenarioLike, param: str = "batch_size", margin: Union[str, float] = "5%",
           max_value: int = 0, keep_global_batch: int = 0, fit: bool = False, jobs: int = 0,
           **overrides: Any) -> SearchResult:
    """The largest ``param`` (batch_size, seq_len, grad_accum_steps) that fits with ``margin``
    left free ("5%", 0.05 or "2GiB"), as `oomcast search`; with ``keep_global_batch=N`` the
    largest micro-batch of a global batch N (its accumulation steps in ``.json``)."""
    if keep_global_batch and (param != "batch_size" or max_value or fit):
        raise ValueError("keep_global_batch varies batch_size and grad_accum_steps together: "
                         "it takes no param, max_value or fit")
    path, text, sets = scenario_arguments(scenario, overrides)
    doc, report = _core.search(path, text, sets, param, _margin_text(margin), max_value, keep_global_batch,
                               fit, jobs)
    parsed = json.loads(doc)
    best = parsed.get("micro_batch") if keep_global_batch else parsed.get("max_fitting")
    return SearchResult(best=best, json=parsed, text=report)


def _grid_text(grid: Union[str, Mapping[str, Any]]) -> str:
    if isinstance(grid, str):
        return grid
    axes = []
    for key, values in grid.items():
        if isinstance(values, (list, tuple, range)):
            values = ",".join(json.dumps(v) if not isinstance(v, str) else v for v in values)
        axes.append(f"{key}={values}")
    return " ".join(axes)


def sweep(scenario: ScenarioLike, grid: Union[str, Mapping[str, Any]], jobs: int = 0, **overrides: Any) -> Any:
    """Every combination of ``grid`` (``{"batch_size": [8, 16], "checkpointing": ["none", "full"]}``
    or the CLI's text ``"batch_size=8,16 checkpointing=none,full"``), as `oomcast sweep`: a
    pandas DataFrame when pandas is installed (one column per grid key, then the results), else
    a list of dicts."""
    path, text, sets = scenario_arguments(scenario, overrides)
    doc = json.loads(_core.sweep(path, text, sets, _grid_text(grid), jobs))
    rows: List[Dict[str, Any]] = []
    for row in doc["rows"]:
        flat = dict(row["settings"])
        flat.update({k: v for k, v in row.items() if k != "settings"})
        rows.append(flat)
    try:
        import pandas
    except ImportError:
        return rows
    return pandas.DataFrame(rows)


def whatif(scenario: ScenarioLike, fit: bool = True, jobs: int = 0, **overrides: Any) -> WhatifResult:
    """The doctor, as `oomcast whatif`: which OOM patterns the scenario shows and which
    simulated fix saves most (``fit=False`` skips the closed-form fit, as `--no-fit`)."""
    path, text, sets = scenario_arguments(scenario, overrides)
    doc, report = _core.whatif(path, text, sets, fit, jobs)
    parsed = json.loads(doc)
    return WhatifResult(fits=parsed["fits"], patterns=list(parsed["patterns"]), fixes=list(parsed["fixes"]),
                        json=parsed, text=report)
