# Hugging Face transformers' ResNet-50 (microsoft/resnet-50's config: bottleneck v1.5, [3, 4, 6, 3],
# 1000 classes), built from its config by the real transformers code, on square images.
import torch
from transformers import ResNetConfig, ResNetForImageClassification

sizes = {"image_size": [64, 96, 128]}  # the capture's sizes: multiples of the 32x downsampling


def model():
    return ResNetForImageClassification(ResNetConfig(num_labels=1000))


def batch(batch_size, image_size):
    return torch.randn(batch_size, 3, image_size, image_size), torch.randint(0, 1000, (batch_size,))


def loss(output, target):
    return torch.nn.functional.cross_entropy(output.logits, target)
