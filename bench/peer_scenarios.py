"""The scenario side of bench/peers.py: reads an oomcast scenario file (with `--set` overrides),
finds the Hugging Face transformers class of the same model, and says which of the scenario's
settings a peer harness must act on. Builds no model itself: peer_tools.py does, under the
peer's own device context (meta or FakeTensorMode).

A model is "HF-style" when its family has a transformers class of the same layout: gpt2
(GPT2LMHeadModel), llama (LlamaForCausalLM; Mistral's layout too), bert
(BertForSequenceClassification) and any `model: {path: config.json}` (AutoModelForCausalLM).
ResNet, ViT (torchvision layout), the MLP and nn.TransformerEncoder have none, so no peer row.
"""
import json
import os

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS_DIR = os.path.join(REPO, "models")

# The scenario dims of each family and the transformers config field each one sets.
GPT2_FIELDS = {"layers": "n_layer", "hidden": "n_embd", "heads": "n_head", "vocab": "vocab_size",
               "max_positions": "n_positions"}
LLAMA_FIELDS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
                "kv_heads": "num_key_value_heads", "ffn_hidden": "intermediate_size", "vocab": "vocab_size",
                "max_positions": "max_position_embeddings"}
BERT_FIELDS = {"layers": "num_hidden_layers", "hidden": "hidden_size", "heads": "num_attention_heads",
               "ffn_hidden": "intermediate_size", "vocab": "vocab_size", "max_positions": "max_position_embeddings",
               "type_vocab": "type_vocab_size"}


class Scenario:
    """One row of the peers table: the scenario's keys after overrides, its label, and the
    transformers model that stands for its model (None with a reason when there is none)."""

    def __init__(self, path, overrides=(), label=None):
        self.path = path
        self.overrides = list(overrides)
        with open(path) as f:
            self.keys = yaml.safe_load(f)
        for override in self.overrides:
            dotted, value = override.split("=", 1)
            set_dotted(self.keys, dotted, yaml.safe_load(value))
        name = os.path.splitext(os.path.basename(path))[0]
        self.label = label or name
        self.hf_kind, self.hf_config, self.no_hf_reason = hf_model_of(self.keys.get("model"), os.path.dirname(path))

    def get(self, dotted, default=None):
        node = self.keys
        for part in dotted.split("."):
            if not isinstance(node, dict) or part not in node:
                return default
            node = node[part]
        return node

    @property
    def optimizer(self):
        """(type, impl, options) of the scenario's optimizer; oomcast's default is AdamW."""
        opt = self.keys.get("optimizer", "adamw")
        if isinstance(opt, str):
            return opt, None, {}
        return opt.get("type", "adamw"), opt.get("impl"), opt

    @property
    def parallel(self):
        """The scenario's `parallel` section ({} for one device), with `deepspeed_config` read."""
        par = dict(self.keys.get("parallel") or {})
        config_file = par.get("deepspeed_config")
        if config_file:
            with open(os.path.join(os.path.dirname(self.path), config_file)) as f:
                par["deepspeed"] = json.load(f)
        return par

    @property
    def zero_stage(self):
        return ((self.parallel.get("deepspeed") or {}).get("zero_optimization") or {}).get("stage")

    @property
    def lora(self):
        return self.get("training.trainable.lora")

    @property
    def job_kind(self):
        return self.get("job.kind", "train")

    @property
    def weights_format(self):
        weights = self.keys.get("weights")
        return weights.get("format") if isinstance(weights, dict) else weights


def set_dotted(keys, dotted, value):
    """Applies one `--set a.b=value` override, as oomcast's --set does for a plain key path."""
    parts = dotted.split(".")
    node = keys
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {} if part not in node or node[part] is None else {"type": node[part]}
        node = node[part]
    node[parts[-1]] = value


def hf_model_of(model, scenario_dir):
    """(kind, config dict, reason): kind is 'causal_lm' or 'sequence_classification' and the
    dict the transformers config is made from, or (None, None, why not)."""
    if isinstance(model, str):
        model = {"preset": model}
    if not isinstance(model, dict):
        return None, None, "no model"
    if "path" in model:
        with open(os.path.join(scenario_dir, model["path"])) as f:
            config = json.load(f)
        return "causal_lm", config, None
    preset_file = os.path.join(MODELS_DIR, f"{model['preset']}.yaml")
    with open(preset_file) as f:
        preset = yaml.safe_load(f)
    dims = dict(preset.get("dims") or {})
    options = dict(preset.get("options") or {})
    for key, value in model.items():
        if key != "preset":
            (dims if key in dims else options)[key] = value
    family = preset["family"]
    if family == "gpt2":
        config = {"model_type": "gpt2", **{GPT2_FIELDS[k]: v for k, v in dims.items()}}
        return "causal_lm", config, None
    if family == "llama":
        config = {"model_type": "llama", **{LLAMA_FIELDS[k]: v for k, v in dims.items()},
                  "tie_word_embeddings": bool(options.get("tied_embeddings", False))}
        return "causal_lm", config, None
    if family == "bert":
        config = {"model_type": "bert", **{BERT_FIELDS[k]: v for k, v in dims.items()},
                  "num_labels": int(options.get("num_labels", 2))}
        return "sequence_classification", config, None
    return None, None, f"family {family} has no transformers class"


def scenario_dropout_fields(model_type, dropout):
    """The transformers config fields that set every dropout of the model to `dropout`."""
    if model_type == "gpt2":
        return {"resid_pdrop": dropout, "embd_pdrop": dropout, "attn_pdrop": dropout}
    if model_type == "bert":
        return {"hidden_dropout_prob": dropout, "attention_probs_dropout_prob": dropout}
    return {"attention_dropout": dropout}
