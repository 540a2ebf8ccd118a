"""oomcast.capture on a live nn.Module equals the file-based capture of the same model; it
leaves the module's weights alone; oomcast.check raises PredictedOOM on a step that does not
fit; OOMCAST_CHECK=0 skips it."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import yaml  # noqa: E402

import oomcast  # noqa: E402
from conftest import SOURCE  # noqa: E402


def model_file(name):
    path = os.path.join(SOURCE, "capture", "examples", f"{name}.py")
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return path, module


def file_capture(path, tmp_path):
    graph = tmp_path / "file.graph.yaml"
    subprocess.run([sys.executable, os.path.join(SOURCE, "capture", "oomcast_capture.py"), path, "-o", str(graph),
                    "-q"], check=True)
    with open(graph) as handle:
        return yaml.safe_load(handle)


def live_capture(name):
    path, module = model_file(name)
    live = module.model()
    optimizer = module.optimizer(live.parameters()) if hasattr(module, "optimizer") else None
    graph = oomcast.capture(live, batch=module.batch, loss=getattr(module, "loss", None), optimizer=optimizer,
                            sizes=getattr(module, "sizes", None), name=name)
    return path, yaml.safe_load(graph.text())


@pytest.mark.parametrize("name", ["mlp", "handwritten_transformer"])
def test_capture_of_a_live_module_equals_the_file_capture(name, tmp_path):
    path, live = live_capture(name)
    assert live == file_capture(path, tmp_path)


def test_capture_of_a_live_module_has_no_construction_temporaries_and_else_equals_the_file(tmp_path):
    # nn.TransformerEncoder deep-copies a template layer in model(); a live module was built
    # before the capture, so what its construction freed is not in its graph.
    path, live = live_capture("transformer_encoder")
    from_file = file_capture(path, tmp_path)
    temporaries = [p for p in from_file["parameters"] if "construction_temporary" in p]
    assert temporaries
    from_file["parameters"] = [p for p in from_file["parameters"] if "construction_temporary" not in p]
    assert live == from_file


def test_capture_leaves_the_real_weights_untouched():
    _, module = model_file("mlp")
    live = module.model()
    before = [p.detach().clone() for p in live.parameters()]
    oomcast.capture(live, batch=module.batch)
    assert all(p.device.type == "cpu" and p.grad is None for p in live.parameters())
    assert all(torch.equal(a, b) for a, b in zip(before, live.parameters()))


def test_a_captured_graph_plans_as_its_file(tmp_path, cli_json):
    _, module = model_file("mlp")
    graph = oomcast.capture(module.model(), batch=module.batch, optimizer=module.optimizer)
    path = graph.save(str(tmp_path / "mlp.graph.yaml"))
    scenario = {"model": graph, "batch_size": 64, "device": "a100-80gb", "precision": "fp32"}
    (tmp_path / "s.yaml").write_text(f"model: {path}\nbatch_size: 64\ndevice: a100-80gb\nprecision: fp32\n")
    expected = cli_json("plan", str(tmp_path / "s.yaml"))
    got = oomcast.plan(scenario)
    assert got.peak_reserved_bytes == expected["peak_reserved_bytes"]
    assert got.memory_stats == expected["memory_stats"]


def big_mlp():
    # 3.0G parameters, on the meta device only: 12 GB of fp32 weights, 48 GB with AdamW's state
    # and the gradients. The widths differ so the capture folds no repeat.
    widths = [32768, 32768, 30000, 32768, 10]
    layers = []
    for inner, outer in zip(widths, widths[1:]):
        layers += [torch.nn.Linear(inner, outer, device="meta"), torch.nn.ReLU()]
    return torch.nn.Sequential(*layers[:-1])


def test_check_raises_predicted_oom_with_pytorchs_message_and_a_fix():
    model = big_mlp()
    optimizer = torch.optim.AdamW(model.parameters(), foreach=False)
    example = (torch.zeros(8, 32768, device="meta"), torch.zeros(8, dtype=torch.long, device="meta"))
    with pytest.raises(oomcast.PredictedOOM) as raised:
        oomcast.check(model, optimizer, example, device="a100-40gb")
    message = str(raised.value)
    assert message.startswith("CUDA out of memory. Tried to allocate")
    assert "the doctor's first fix: " in message
    assert raised.value.prediction.fits is False


def test_check_returns_the_prediction_when_it_fits():
    _, module = model_file("mlp")
    live = module.model()
    example = module.batch(32)
    prediction = oomcast.check(live, module.optimizer(live.parameters()), example, device="h100-80gb")
    assert prediction.fits is True
    assert prediction.json["parameters"] == sum(p.numel() for p in live.parameters())


def test_check_is_skipped_with_oomcast_check_0(monkeypatch):
    monkeypatch.setenv("OOMCAST_CHECK", "0")
    model = big_mlp()
    assert oomcast.check(model, None, (torch.zeros(8, 32768), torch.zeros(8, dtype=torch.long)),
                         device="a100-40gb") is None

