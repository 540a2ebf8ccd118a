"""A scenario as the Python API takes it (a path, or a dict in the scenario format) and
overrides as `--set` takes them, turned into what oomcast._core reads: (path, text, overrides)."""
from __future__ import annotations

import json
import os
from typing import Any, Dict, List, Mapping, Optional, Tuple, Union

ScenarioLike = Union[str, "os.PathLike[str]", Mapping[str, Any]]

# The name a dict scenario has in messages; relative model paths resolve against the working directory.
DICT_SCENARIO_NAME = "<scenario dict>"


def override_text(key: str, value: Any) -> str:
    """One `--set` string. A str goes as it is (as typed after `--set key=`); anything else as
    YAML flow (JSON): True -> true, None -> null, a dict -> {"k": v}."""
    if isinstance(value, str):
        return f"{key}={value}"
    return f"{key}={json.dumps(_plain(value))}"


def _plain(value: Any) -> Any:
    """Values a scenario holds, with a captured graph replaced by the path of its file."""
    saved = getattr(value, "saved_path", None)
    if callable(saved):
        return saved()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return value


def scenario_arguments(scenario: ScenarioLike, overrides: Mapping[str, Any]) -> Tuple[str, Optional[str], List[str]]:
    """(path, text, overrides) for oomcast._core: text is None for a file."""
    sets = [override_text(key, value) for key, value in overrides.items()]
    if isinstance(scenario, Mapping):
        # JSON is YAML; one key a line so an error's line number points into this text.
        return DICT_SCENARIO_NAME, json.dumps(_plain(scenario), indent=1), sets
    if isinstance(scenario, (str, os.PathLike)):
        return os.fspath(scenario), None, sets
    raise TypeError(f"scenario must be a path or a dict in the scenario format, not {type(scenario).__name__}")


def as_dict(value: Any) -> Dict[str, Any]:
    return dict(value) if isinstance(value, Mapping) else {}
