"""oomcast: predicts the GPU memory of a PyTorch training step by replaying its allocation
schedule through a simulator of PyTorch's CUDA caching allocator.

    import oomcast
    prediction = oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml", batch_size=16)
    prediction.fits, prediction.peak_reserved_bytes, prediction.memory_stats["num_alloc_retries"]

plan, replay, search, sweep and whatif are the CLI's commands (the same C++ core, the same
numbers); capture and check take a live nn.Module; track compares a real GPU run with a
prediction. Bad input raises oomcast.InputError (a ValueError naming file, line and key).
"""
from __future__ import annotations

import os

from ._errors import InputError, PredictedOOM
from ._results import Phase, Prediction, ReplayResult, SearchResult, WhatifResult

_PACKAGED_MODELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "models")
if os.path.isdir(_PACKAGED_MODELS):  # a wheel: the presets travel with the package
    os.environ.setdefault("OOMCAST_MODELS_DIR", _PACKAGED_MODELS)

from ._api import plan, replay, search, sweep, whatif  # noqa: E402
from .capture import CaptureError, Graph, capture  # noqa: E402
from .check import check  # noqa: E402
from .track import track  # noqa: E402

__version__ = "0.1.0"
__all__ = ["plan", "replay", "search", "sweep", "whatif", "capture", "check", "track", "Prediction", "Phase",
           "ReplayResult", "SearchResult", "WhatifResult", "Graph", "InputError", "PredictedOOM", "CaptureError"]
