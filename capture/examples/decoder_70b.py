# The decoder of decoder_4096.py at Llama-2-70B's shape: 80 layers, 8192 wide, 64 heads with 8
# key/value heads (grouped-query attention), SwiGLU 28672. Captured on the meta device.
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import decoder_4096 as base  # noqa: E402

base.WIDTH, base.HEADS, base.KV_HEADS, base.LAYERS, base.FFN = 8192, 64, 8, 80, 28672
batch = base.batch
model = base.model
