"""oomcast.plan gives the numbers `oomcast plan` prints, for a path, a dict and overrides."""
from __future__ import annotations

import filecmp

import pytest
import yaml

import oomcast
from conftest import without

SCENARIOS = ["scenarios/gpt2-small-b8-amp-bf16.yaml", "scenarios/llama-2-7b-fp32-adamw-oom.yaml",
             "scenarios/gpt2-tiny-cpu.yaml", "scenarios/llama-2-7b-lora-ddp-2xa100-40gb.yaml"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_plan_of_a_file_is_the_cli_json(scenario, cli_json):
    prediction = oomcast.plan(scenario)
    assert prediction.json == cli_json("plan", scenario)


def test_plan_typed_fields_are_the_documents(cli_json):
    document = cli_json("plan", "scenarios/gpt2-small-b8-amp-bf16.yaml")
    prediction = oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml")
    assert prediction.fits is True and prediction.oom_message is None
    assert prediction.peak_allocated_bytes == document["peak_allocated_bytes"]
    assert prediction.peak_reserved_bytes == document["peak_reserved_bytes"]
    assert prediction.memory_stats == document["memory_stats"]
    assert prediction.memory_stats["allocated_bytes.all.peak"] == document["memory_stats"]["allocated_bytes.all.peak"]
    assert [p.name for p in prediction.phases] == [p["name"] for p in document["phases"]]
    assert [p.peak_reserved_bytes for p in prediction.phases] == [p["peak_reserved_bytes"] for p in document["phases"]]
    assert prediction.breakdown == document["breakdown"]
    assert prediction.step_seconds == document["step_time"]["step_seconds"]


def test_plan_of_an_oom_scenario_carries_pytorchs_message(cli_json):
    prediction = oomcast.plan("scenarios/llama-2-7b-fp32-adamw-oom.yaml")
    assert prediction.fits is False
    assert prediction.oom_message.startswith("CUDA out of memory. Tried to allocate")
    assert prediction.oom_message == cli_json("plan", "scenarios/llama-2-7b-fp32-adamw-oom.yaml")["oom_message"]


def test_overrides_act_as_set(cli_json):
    prediction = oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml", batch_size=32, precision="fp32",
                              attention="mem_efficient", **{"allocator.expandable_segments": True})
    assert prediction.json == cli_json("plan", "scenarios/gpt2-small-b8-amp-bf16.yaml", "--set", "batch_size=32",
                                       "--set", "precision=fp32", "--set", "attention=mem_efficient",
                                       "--set", "allocator.expandable_segments=true")


def test_a_dict_scenario_plans_as_its_file(cli_json):
    with open("scenarios/gpt2-small-b8-amp-bf16.yaml") as handle:
        description = yaml.safe_load(handle)
    from_dict = oomcast.plan(description, batch_size=4)
    from_file = cli_json("plan", "scenarios/gpt2-small-b8-amp-bf16.yaml", "--set", "batch_size=4")
    assert without(from_dict.json, ["scenario"]) == without(from_file, ["scenario"])


def test_report_is_the_cli_text(cli):
    code, text = cli("plan", "scenarios/gpt2-small-b8-amp-bf16.yaml")
    assert code == 0
    assert oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml").report() == text


def test_to_snapshot_writes_the_cli_snapshot(cli, tmp_path):
    ours = tmp_path / "python.pickle"
    theirs = tmp_path / "cli.pickle"
    oomcast.plan("scenarios/gpt2-tiny-cpu.yaml", device="a100-80gb").to_snapshot(str(ours))
    code, _ = cli("plan", "scenarios/gpt2-tiny-cpu.yaml", "--set", "device=a100-80gb", "--export-snapshot", str(theirs))
    assert code == 0
    assert filecmp.cmp(ours, theirs, shallow=False)


def test_to_html_and_repr_html_are_the_cli_page(cli, tmp_path):
    page = tmp_path / "plan.html"
    prediction = oomcast.plan("scenarios/gpt2-tiny-cpu.yaml", device="a100-80gb")
    prediction.to_html(str(page))
    code, _ = cli("plan", "scenarios/gpt2-tiny-cpu.yaml", "--set", "device=a100-80gb", "--html",
                  str(tmp_path / "cli.html"))
    assert code == 0
    assert page.read_text() == (tmp_path / "cli.html").read_text()
    assert prediction._repr_html_() == page.read_text()


def test_a_mistyped_override_is_an_input_error_naming_the_key():
    with pytest.raises(oomcast.InputError) as raised:
        oomcast.plan("scenarios/gpt2-small-b8-amp-bf16.yaml", batch_szie=3)
    assert isinstance(raised.value, ValueError)
    assert raised.value.key == "batch_szie"
    assert "did you mean 'batch_size'" in str(raised.value)


def test_a_bad_key_in_a_file_is_an_input_error_naming_file_and_line(tmp_path):
    scenario = tmp_path / "typo.yaml"
    scenario.write_text("model: gpt2\nbatch_size: 8\nseq_len: 128\nprecison: fp32\ndevice: a100-80gb\n")
    with pytest.raises(oomcast.InputError) as raised:
        oomcast.plan(str(scenario))
    assert raised.value.file == str(scenario)
    assert raised.value.line == 4
    assert raised.value.key == "precison"


def test_a_scenario_that_is_neither_path_nor_dict_is_a_type_error():
    with pytest.raises(TypeError):
        oomcast.plan(42)


def test_a_mapping_override_acts_as_set_with_a_yaml_mapping(cli_json):
    fsdp2 = {"reshard_after_forward": False, "mixed_precision": {"param_dtype": "bf16", "reduce_dtype": "bf16"}}
    prediction = oomcast.plan("scenarios/llama-2-7b-fsdp2-8xh100.yaml", **{"parallel.fsdp2": fsdp2})
    expected = cli_json("plan", "scenarios/llama-2-7b-fsdp2-8xh100.yaml", "--set",
                        "parallel.fsdp2={reshard_after_forward: false, mixed_precision: {param_dtype: bf16, "
                        "reduce_dtype: bf16}}")
    assert prediction.json == expected
    assert prediction.peak_allocated_bytes != oomcast.plan("scenarios/llama-2-7b-fsdp2-8xh100.yaml").peak_allocated_bytes
