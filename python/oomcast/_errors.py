"""The exceptions of the oomcast package: bad input, and a predicted out-of-memory."""
from __future__ import annotations


class InputError(ValueError):
    """Bad input (a scenario, an override, a snapshot, a trace): the C++ core's InputError.

    ``str(error)`` is the one line the CLI prints ("file:line:col: error: message");
    ``file``, ``line``, ``column``, ``event`` and ``key`` say where (empty, 0 or -1 when unknown).
    """

    def __init__(self, message: str, file: str = "", line: int = 0, column: int = 0, event: int = -1,
                 key: str = "") -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.column = column
        self.event = event
        self.key = key


class PredictedOOM(RuntimeError):
    """oomcast.check(): the step would not fit. The message is PyTorch's own OOM text and the
    doctor's first fix; ``prediction`` is the full oomcast.Prediction."""

    def __init__(self, message: str, prediction: object) -> None:
        super().__init__(message)
        self.prediction = prediction
