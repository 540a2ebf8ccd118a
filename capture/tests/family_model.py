# A validate/models.py family built from a preset's dims (models/PRESET.yaml, PRESET from
# $OOMCAST_FAMILY_PRESET) as a model file: the test that a captured family plans as its preset.
import os
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "validate"))
import models  # noqa: E402

PRESET = os.environ.get("OOMCAST_FAMILY_PRESET", "gpt2-tiny")
with open(os.path.join(REPO, "models", PRESET + ".yaml")) as f:
    _doc = yaml.safe_load(f)
FAMILY, DIMS, OPTIONS = _doc["family"], _doc["dims"], _doc.get("options", {})
_KIND = models.family_of(FAMILY)
if _KIND == "resnet":
    sizes = {"batch_size": [2, 3, 5], "image_size": [64, 96, 128]}
elif _KIND in ("vit", "mlp"):
    sizes = {"batch_size": [2, 3, 5]}   # ViT's position table fixes the image size
else:
    sizes = {"batch_size": [2, 3, 5], "seq_len": [16, 24, 40]}


def model():
    return models.build_model(FAMILY, DIMS, OPTIONS, dropout=0.0, attention="eager")


def batch(**s):
    seq = s.get("seq_len") or s.get("image_size") or 0
    x, y = models.make_batch(FAMILY, DIMS, s["batch_size"], seq, None)
    return (x, y), y


def loss(output, target):
    return output[1]
