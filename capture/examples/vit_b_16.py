# torchvision's ViT-B/16 at its 224x224 input (its position table fixes the image size).
import torch
import torchvision


def model():
    return torchvision.models.vit_b_16()


def batch(batch_size):
    return torch.randn(batch_size, 3, 224, 224), torch.randint(0, 1000, (batch_size,))
