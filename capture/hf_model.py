# hf_model.py: a Hugging Face config.json as a capture model file. The class its `architectures`
# entry names (or the Auto class of its task) is built with transformers' own from_config, so
# the forward that runs through the capture is transformers' real modelling code. The task
# decides the batch and the loss, as a user's training script would write them:
#   *ForCausalLM            input_ids -> logits, transformers' ForCausalLMLoss (shifted labels)
#   *ForMaskedLM            input_ids -> logits, cross-entropy over every token
#   *ForConditionalGeneration of an encoder-decoder (T5): input_ids and decoder_input_ids,
#                           cross-entropy over the decoder's logits
#   CLIPModel / SiglipModel image-text pairs (input_ids, pixel_values at the config's
#                           image_size), the contrastive loss over logits_per_image
# Attention is what from_config picks when a user names none (transformers' default: "sdpa"
# where the class supports it, else "eager", as for Gemma 2), or $OOMCAST_HF_ATTENTION. Refusals are CaptureError lines: no transformers, a
# transformers too old for the config's model_type, a class transformers does not have.
import json
import os
import types

from recorder import CaptureError

_ATTENTION = ("sdpa", "eager")


def is_hf_config(path):
    """Whether a model path is a Hugging Face config.json (a JSON object with model_type)."""
    if not path.endswith(".json"):
        return False
    try:
        with open(path) as f:
            return isinstance(json.load(f), dict)
    except (OSError, ValueError):
        return False


def _transformers(path):
    try:
        import transformers
    except ImportError:
        raise CaptureError(f"{path}: a config.json is captured through transformers' own model class, and this "
                           f"python cannot import transformers (scripts/make-venv.sh installs it in .venv/)")
    return transformers


def _read(path):
    try:
        with open(path) as f:
            raw = json.load(f)
    except (OSError, ValueError) as err:
        raise CaptureError(f"{path}: cannot read it as JSON: {err}")
    if not isinstance(raw, dict) or not isinstance(raw.get("model_type"), str):
        raise CaptureError(f"{path}: a config.json needs a string 'model_type'")
    return raw


def _config(path, raw, transformers):
    kind = raw["model_type"]
    mapping = transformers.models.auto.configuration_auto.CONFIG_MAPPING
    if kind not in mapping:
        raise CaptureError(f"{path}: model_type '{kind}' is unknown to transformers {transformers.__version__} "
                           f"(a newer transformers may have it; pip install -U transformers in the venv)")
    try:
        return mapping[kind].from_dict(raw)
    except Exception as err:  # a config transformers' own checks refuse
        raise CaptureError(f"{path}: transformers {transformers.__version__} refuses the config: "
                           f"{type(err).__name__}: {str(err).strip().splitlines()[0] if str(err).strip() else ''}")


def _model_class(path, raw, config, transformers):
    names = raw.get("architectures") or []
    if names:
        cls = getattr(transformers, names[0], None)
        if cls is None:
            raise CaptureError(f"{path}: architectures names {names[0]}, which transformers "
                               f"{transformers.__version__} does not have")
        return cls
    try:
        return transformers.AutoModelForCausalLM._model_mapping[type(config)]
    except KeyError:
        raise CaptureError(f"{path}: no 'architectures' entry and model_type '{raw['model_type']}' has no "
                           f"causal-LM class; name the class in 'architectures'")


def _task(cls):
    name = cls.__name__
    if name.endswith("ForCausalLM"):
        return "causal_lm"
    if name.endswith("ForMaskedLM"):
        return "masked_lm"
    if name in ("CLIPModel", "SiglipModel", "Siglip2Model"):
        return "image_text"
    if name.endswith("ForConditionalGeneration") and "decoder_input_ids" in _forward_arguments(cls):
        return "seq2seq"
    raise CaptureError(f"{cls.__name__}: oomcast captures causal-LM, masked-LM, encoder-decoder "
                       f"(T5-style) and CLIP/SigLIP image-text classes; write a model file for this one "
                       f"(capture/README.md)")


def _forward_arguments(cls):
    import inspect
    return set(inspect.signature(cls.forward).parameters)


def model_file(path):
    """A module-like object with model(), batch(**sizes) and loss(output, target) for the
    config.json at `path` (what runner.load_model_file returns for a model file)."""
    import torch
    import torch.nn.functional as F

    transformers = _transformers(path)
    raw = _read(path)
    config = _config(path, raw, transformers)
    cls = _model_class(path, raw, config, transformers)
    task = _task(cls)
    attention = os.environ.get("OOMCAST_HF_ATTENTION") or None
    if attention is not None and attention not in _ATTENTION:
        raise CaptureError(f"OOMCAST_HF_ATTENTION={attention}: expected one of {', '.join(_ATTENTION)}")

    # A training step keeps no KV cache. Set before the first build: T5 copies the config into
    # its decoder stack at construction, so setting it afterwards changes only later builds.
    config.use_cache = False

    def model():
        return cls._from_config(config, attn_implementation=attention)

    text_config = getattr(config, "text_config", None) or config
    vocab = text_config.vocab_size

    if task == "image_text":
        vision = config.vision_config

        def batch(batch_size, seq_len):
            ids = torch.randint(0, vocab, (batch_size, seq_len))
            pixels = torch.randn(batch_size, vision.num_channels, vision.image_size, vision.image_size)
            return {"input_ids": ids, "pixel_values": pixels}, torch.arange(batch_size)

        def loss(output, target):  # CLIP's symmetric contrastive loss over the similarity matrix
            logits = output.logits_per_image
            return (F.cross_entropy(logits, target) + F.cross_entropy(logits.t(), target)) / 2
    elif task == "seq2seq":
        def batch(batch_size, seq_len):
            ids = torch.randint(0, vocab, (batch_size, seq_len))
            return {"input_ids": ids, "decoder_input_ids": ids}, ids

        def loss(output, target):
            logits = output.logits
            return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), target.reshape(-1))
    else:
        def batch(batch_size, seq_len):
            ids = torch.randint(0, vocab, (batch_size, seq_len))
            return {"input_ids": ids}, ids

        if task == "causal_lm":
            from transformers.loss.loss_utils import ForCausalLMLoss

            def loss(output, target):
                return ForCausalLMLoss(output.logits, target, vocab)
        else:
            def loss(output, target):
                logits = output.logits
                return F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), target.reshape(-1))

    return types.SimpleNamespace(model=model, batch=batch, loss=loss, config=config, model_class=cls,
                                 task=task, attention=attention, __file__=os.path.abspath(path))
