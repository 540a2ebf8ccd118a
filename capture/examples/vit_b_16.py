# Hugging Face transformers' ViT-B/16 (google/vit-base-patch16-224's config: 12 layers, 12 heads,
# hidden 768, patch 16, 1000 classes), built from its config by the real transformers code, at
# its 224x224 input (its position table fixes the image size).
import torch
from transformers import ViTConfig, ViTForImageClassification


def model():
    return ViTForImageClassification(ViTConfig(num_labels=1000))


def batch(batch_size):
    return torch.randn(batch_size, 3, 224, 224), torch.randint(0, 1000, (batch_size,))


def loss(output, target):
    return torch.nn.functional.cross_entropy(output.logits, target)
