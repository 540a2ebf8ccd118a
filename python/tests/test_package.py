"""The package as a type checker and a fresh interpreter see it: typed (py.typed), its names
exported, its errors Python's, and `import oomcast` loading none of the heavy modules (torch,
yaml, pandas, numpy) that only capture, check, track or sweep need."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import oomcast


def test_the_package_is_marked_typed():
    assert os.path.isfile(os.path.join(os.path.dirname(oomcast.__file__), "py.typed"))


def test_every_exported_name_exists():
    assert all(hasattr(oomcast, name) for name in oomcast.__all__)


def test_input_error_is_a_value_error_and_predicted_oom_a_runtime_error():
    assert issubclass(oomcast.InputError, ValueError)
    assert issubclass(oomcast.PredictedOOM, RuntimeError)


def test_import_oomcast_loads_no_heavy_module():
    probe = ("import sys, json, oomcast; "
             "print(json.dumps(sorted(m for m in ('torch', 'yaml', 'pandas', 'numpy') if m in sys.modules)))")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONSTARTUP"})
    assert json.loads(done.stdout) == []


def test_a_bad_key_in_a_dict_scenario_is_an_input_error_naming_the_dict_its_line_and_key():
    with pytest.raises(oomcast.InputError) as raised:
        oomcast.plan({"model": "gpt2", "batch_size": 8, "seq_len": 128, "precison": "fp32", "device": "a100-80gb"})
    assert raised.value.file == "<scenario dict>"
    assert raised.value.line == 5  # the dict goes to the core one key a line, after its "{"
    assert raised.value.key == "precison"
    assert "did you mean 'precision'" in str(raised.value)


@pytest.mark.parametrize("call", [
    lambda: oomcast.plan("scenarios/no-such-scenario.yaml"),
    lambda: oomcast.plan({"model": "gpt2", "batch_size": -1, "device": "a100-80gb"}),
    lambda: oomcast.plan("scenarios/gpt2-tiny-cpu.yaml", **{"allocator": {"expandable_segments": "maybe"}}),
    lambda: oomcast.replay("tests/data/cli/no-such.pickle"),
    lambda: oomcast.replay({"segments": "not a list", "device_traces": 7}),
    lambda: oomcast.sweep("scenarios/gpt2-tiny-cpu.yaml", "batch_size="),
    lambda: oomcast.search("scenarios/gpt2-tiny-cpu.yaml", param="learning_rate"),
], ids=["missing-file", "negative-batch", "bad-nested-override", "missing-snapshot", "malformed-snapshot-dict",
        "empty-grid-axis", "unknown-search-param"])
def test_bad_input_is_an_input_error_not_a_crash(call):
    with pytest.raises(oomcast.InputError):
        call()
