# diffusers' own UNet2DModel (a class from an installed package, not written here), small: two
# resolutions, an attention down and up block, the sinusoidal timestep embedding diffusers builds;
# the loss is the MSE against the noise, as its training scripts write it.
import torch
import torch.nn.functional as F
from diffusers import UNet2DModel


def model():
    return UNet2DModel(sample_size=32, in_channels=3, out_channels=3, layers_per_block=1,
                       block_out_channels=(16, 32), norm_num_groups=8,
                       down_block_types=("DownBlock2D", "AttnDownBlock2D"),
                       up_block_types=("AttnUpBlock2D", "UpBlock2D"))


def batch(batch_size, image_size):
    noisy = torch.randn(batch_size, 3, image_size, image_size)
    timesteps = torch.randint(0, 1000, (batch_size,))
    return (noisy, timesteps), torch.randn(batch_size, 3, image_size, image_size)


def loss(output, target):
    return F.mse_loss(output.sample, target)


sizes = {"batch_size": [2, 3, 5], "image_size": [16, 24, 40]}
