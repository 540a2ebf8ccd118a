# torchvision's ResNet-50 on square images (image_size a multiple of 32).
import torch
import torchvision

sizes = {"image_size": [64, 96, 128]}  # the capture's sizes: multiples of the 32x downsampling


def model():
    return torchvision.models.resnet50()


def batch(batch_size, image_size):
    return torch.randn(batch_size, 3, image_size, image_size), torch.randint(0, 1000, (batch_size,))
