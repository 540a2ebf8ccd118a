"""oomcast.replay, search, sweep and whatif give the numbers of `oomcast replay|search|sweep|whatif --json`."""
from __future__ import annotations

import gzip
import pickle
import sys

import pytest

import oomcast
from conftest import without

SNAPSHOT = "tests/data/cs336_kk_2p7b_fp32_step_ctx128.pickle.gz"


def test_replay_of_a_snapshot_file_is_the_cli_json(cli_json):
    assert oomcast.replay(SNAPSHOT).json == cli_json("replay", SNAPSHOT)


def test_replay_on_a_smaller_device_is_the_cli_json(cli_json):
    result = oomcast.replay(SNAPSHOT, device_memory="40GiB")
    assert result.json == cli_json("replay", SNAPSHOT, "--device-memory", "40GiB")
    assert result.fits is False and result.oom_message.startswith("CUDA out of memory")


def test_replay_of_a_trace_with_an_alloc_conf_is_the_cli_json(cli_json):
    result = oomcast.replay("tests/data/cli/oom.trace", alloc_conf="expandable_segments:True",
                            device_memory=100 * 1024 * 1024)
    assert result.json == cli_json("replay", "tests/data/cli/oom.trace", "--alloc-conf", "expandable_segments:True",
                                   "--device-memory", "100MiB")


def test_replay_of_the_snapshot_dict_in_memory_equals_the_file():
    with gzip.open(SNAPSHOT, "rb") as handle:
        snapshot = pickle.load(handle)  # what torch.cuda.memory._snapshot() returned when it was recorded
    from_dict = oomcast.replay(snapshot)
    from_file = oomcast.replay(SNAPSHOT)
    assert from_dict.reproduced is True
    assert without(from_dict.json, ["analysis"]) == without(from_file.json, ["analysis"])
    assert from_dict.json["analysis"]["peak_allocated_bytes"] == from_file.json["analysis"]["peak_allocated_bytes"]


def test_replay_of_a_truncated_snapshot_is_an_input_error():
    with pytest.raises(oomcast.InputError) as raised:
        oomcast.replay("tests/data/cli/truncated.pickle.gz")
    assert raised.value.file.endswith("truncated.pickle.gz")


def test_a_device_memory_without_unit_is_an_input_error():
    with pytest.raises(oomcast.InputError, match="has no unit"):
        oomcast.replay("tests/data/cli/oom.trace", device_memory="80")


def test_search_is_the_cli_json(cli_json):
    result = oomcast.search("scenarios/gpt2-small-b8-amp-bf16.yaml", margin="2GiB", max_value=64)
    expected = cli_json("search", "scenarios/gpt2-small-b8-amp-bf16.yaml", "--margin", "2GiB", "--max", "64")
    assert without(result.json, ["seconds"]) == without(expected, ["seconds"])
    assert result.best == expected["max_fitting"]


def test_search_keeping_the_global_batch_is_the_cli_json(cli_json):
    result = oomcast.search("scenarios/llama-2-7b-zero2-8xa100.yaml", keep_global_batch=256)
    expected = cli_json("search", "scenarios/llama-2-7b-zero2-8xa100.yaml", "--keep-global-batch", "256")
    assert without(result.json, ["seconds"]) == without(expected, ["seconds"])
    assert result.best == expected["micro_batch"]


def test_a_margin_that_is_no_amount_is_an_input_error():
    with pytest.raises(oomcast.InputError, match="must be a fraction"):
        oomcast.search("scenarios/gpt2-small-b8-amp-bf16.yaml", margin="2GB%")


def _cli_sweep_rows(cli_json, *args):
    rows = []
    for row in cli_json("sweep", *args)["rows"]:
        flat = dict(row["settings"])
        flat.update({k: v for k, v in row.items() if k != "settings"})
        rows.append(flat)
    return rows


def test_sweep_is_a_dataframe_of_the_cli_rows(cli_json):
    pandas = pytest.importorskip("pandas")
    frame = oomcast.sweep("scenarios/gpt2-small-b8-amp-bf16.yaml", {"batch_size": [8, 16], "checkpointing": ["none", "full"]})
    assert isinstance(frame, pandas.DataFrame)
    expected = _cli_sweep_rows(cli_json, "scenarios/gpt2-small-b8-amp-bf16.yaml", "--grid",
                               "batch_size=8,16 checkpointing=none,full")
    assert frame.to_dict("records") == expected


def test_sweep_without_pandas_is_a_list_of_dicts(cli_json, monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # import pandas raises ImportError
    rows = oomcast.sweep("scenarios/gpt2-tiny-cpu.yaml", "batch_size=1,2")
    assert rows == _cli_sweep_rows(cli_json, "scenarios/gpt2-tiny-cpu.yaml", "--grid", "batch_size=1,2")


def test_whatif_is_the_cli_json(cli_json):
    result = oomcast.whatif("scenarios/llama-2-7b-fp32-adamw-oom.yaml", fit=False)
    expected = cli_json("whatif", "scenarios/llama-2-7b-fp32-adamw-oom.yaml", "--no-fit")
    assert without(result.json, ["seconds"]) == without(expected, ["seconds"])
    assert result.fits is False and result.fixes == expected["fixes"]
