"""oomcast.check(): the launch guard at the top of a training script. Captures the live model
(oomcast.capture, on meta tensors), plans one scenario on the target device and raises
PredictedOOM, with PyTorch's own message and the doctor's first fix, when it would not fit.
OOMCAST_CHECK=0 in the environment skips it."""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, Optional, Sequence, Union

from ._api import plan, whatif
from ._errors import PredictedOOM
from ._results import Prediction, WhatifResult
from .capture import capture


def _example_batch_size(batch: Any) -> Optional[int]:
    """The first dimension of the first tensor of an example (inputs, target)."""
    stack = [batch]
    while stack:
        value = stack.pop(0)
        shape = getattr(value, "shape", None)
        if shape is not None and len(shape) > 0:
            return int(shape[0])
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return None


def first_fix(diagnosis: WhatifResult) -> Optional[str]:
    """The doctor's first fix, as its text report names it: its recommendation, else the
    first simulated fix that fits."""
    recommendation = diagnosis.json.get("recommendation")
    if isinstance(recommendation, dict) and recommendation.get("title"):
        overrides = " ".join(f"--set {o}" for o in recommendation.get("overrides") or [])
        return f"{recommendation['title']} ({overrides})" if overrides else recommendation["title"]
    for fix in diagnosis.fixes:
        if fix.get("valid") and fix.get("fits_after"):
            overrides = " ".join(f"--set {o}" for o in fix.get("overrides") or [])
            return f"{fix['title']} ({overrides})" if overrides else fix["title"]
    return None


def check(model: Any, optimizer: Any, batch: Union[Callable[..., Any], Sequence[Any]], device: str = "h100-80gb",
          loss: Optional[Callable[..., Any]] = None, batch_size: Optional[int] = None,
          **scenario: Any) -> Optional[Prediction]:
    """Predicts one training step of ``model`` with ``optimizer`` on ``batch`` on ``device``
    (a device profile name, docs/scenario-format.md) and returns the Prediction; raises
    oomcast.PredictedOOM when it would not fit. ``batch`` is one example ``(inputs, target)``
    (its first dimension the batch size) or ``batch(batch_size, ...)`` as in oomcast.capture;
    ``batch_size`` defaults to the example's. Other keyword arguments are scenario keys
    (``precision="amp_bf16"``, ``seq_len=1024``, ``checkpointing="full"``). Returns None, doing
    nothing, when OOMCAST_CHECK=0.
    """
    if os.environ.get("OOMCAST_CHECK", "1") == "0":
        return None
    if batch_size is None:
        batch_size = None if callable(batch) else _example_batch_size(batch)
        if batch_size is None:
            raise ValueError("oomcast.check: give batch_size= (batch is a function, or its example has no tensor)")
    graph = capture(model, batch, loss=loss, optimizer=optimizer)
    description: Dict[str, Any] = {"model": graph, "device": device, "batch_size": batch_size}
    description.update(scenario)
    prediction = plan(description)
    if prediction.fits:
        return prediction
    fix = first_fix(whatif(description, fit=False))
    message = prediction.oom_message or "the step does not fit"
    message += f"\noomcast: predicted before launch on {device}; the doctor's first fix: " + \
        (fix or "none of its simulated fixes fits") + " (OOMCAST_CHECK=0 skips this check)"
    raise PredictedOOM(message, prediction)
