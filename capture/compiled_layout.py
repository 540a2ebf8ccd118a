# compiled_layout.py: inductor's layout optimization, as far as it changes memory. When a graph
# has convolutions and inductor decides to run them channels-last (GraphLowering.decide_layout_opt,
# torch/_inductor/graph.py, torch 2.13), a convolution input or weight that arrives as a graph
# input in the default (contiguous) layout is copied to channels-last before the kernel, and that
# copy, not the original, is what the forward keeps for the backward. Measured on the CPU with the
# allocation hook (validate/compiled/README.md): a ViT's patch convolution allocates a
# channels-last copy of the image batch and of its weight in every forward, both alive until the
# convolution's backward; a U-Net's forward keeps one copy of the image and one of every conv
# weight. Tensors made inside the graph are already produced channels-last: no copy.
#
# The decision depends on the device the program runs on, so a capture is made for one device
# kind (`--for-device`, written to the graph file's `compiled: {for_device}`):
# - cpu: always on when the graph has a convolution and oneDNN (mkldnn) is available, as it is
#   in the CPU wheels ("For cpu backend and mkldnn enabled, we always use channels_last").
# - cuda (training graphs): off when the graph has 300 or more nodes per convolution, when a
#   convolution's shapes are dynamic, when a convolution is grouped with more than one input
#   channel per group, when a convolution has at least twice the input channels of its output
#   channels with a kernel larger than 1, or when every convolution has 64 or fewer input and
#   output channels; on otherwise.
import torch


def is_convolution(node):
    return node.op == "call_function" and node.target is torch.ops.aten.convolution.default


def _value(node):
    return node.meta.get("val") if hasattr(node, "meta") else None


def decides_channels_last(gm, device_kind):
    """Whether inductor runs this (training) graph's convolutions channels-last on `device_kind`."""
    if not torch._inductor.config.layout_optimization:
        return False
    if torch._inductor.config.force_layout_optimization:
        return True
    convolutions = [n for n in gm.graph.nodes if is_convolution(n)]
    if not convolutions:
        return False
    if device_kind == "cpu":
        return torch.backends.mkldnn.enabled and torch.backends.mkldnn.is_available()
    if len(gm.graph.nodes) >= 300 * len(convolutions):
        return False
    weights = [_value(n.args[1]) for n in convolutions]
    if any(not isinstance(w, torch.Tensor) for w in weights):
        return False
    if any(isinstance(d, torch.SymInt) for n in convolutions for idx in (0, 1) for d in _value(n.args[idx]).shape):
        return False
    if any(n.args[-1] > 1 and w.size(1) > 1 for n, w in zip(convolutions, weights)):
        return False  # grouped with more than one input channel per group
    if any(w.size(0) * 2 <= w.size(1) and w.size(2) > 1 for w in weights):
        return False  # fewer output than input channels
    if all(w.size(0) <= 64 and w.size(1) <= 64 for w in weights):
        return False  # every convolution's channels are small
    return True


def channels_last_copies(gm, view_root):
    """The graph inputs a channels-last graph copies before its convolutions (weight and input,
    4-D, not channels-last already), as a set."""
    copies = set()
    for node in gm.graph.nodes:
        if not is_convolution(node):
            continue
        for arg in node.args[:2]:
            if not hasattr(arg, "op"):
                continue
            root = view_root(arg)
            value = _value(root)
            if root.op != "placeholder" or root in copies or not isinstance(value, torch.Tensor):
                continue
            if value.dim() == 4 and not value.is_contiguous(memory_format=torch.channels_last):
                copies.add(root)
    return copies
