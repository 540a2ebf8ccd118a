"""The scenario's `activation_offloading` run on the CPU (docs/scenario-format.md#activation-offloading).

On a GPU, offloading copies each saved tensor to host memory in the forward (autograd keeps the
host copy instead of the device tensor) and copies it back to the device when backward unpacks
it. On the CPU capture the "device" is c10's CPU allocator (what alloc_hook.c records), so the
host copy is made in memory c10 does not allocate (a Python bytearray wrapped by
torch.frombuffer: invisible to the hook, as pinned host memory is to the CUDA caching
allocator), and the unpack allocates a fresh c10 tensor, as `.to("cuda")` allocates a device
one. What autograd saves, when the device tensors die and when the unpacked copies die is then
real PyTorch's. The host side (pinned staging) is not measured here.

Two methods, each the single-stream form of its source:
- save_on_cpu: torch.autograd.graph.save_on_cpu (torch 2.13 torch/autograd/graph.py): every
  saved tensor, parameters included, is copied to the host; unpack is `.to(device)`.
- torchtune: torchtune's OffloadActivations (torchtune/training/_activation_offloading.py) with
  use_streams=False: only tensors of at least min_offload_bytes that are not nn.Parameter or
  nn.Buffer objects; the output head runs under NoOpManager (get_act_offloading_ctx_manager)
  and the loss outside the context, so nothing from the output head on is offloaded.
"""
import contextlib

import torch


def settings(cfg):
    """(method, min_offload_bytes, pin_memory) of the scenario, or None when offloading is off."""
    section = cfg.get("activation_offloading")
    if not section:
        return None
    if section is True:
        section = {}
    method = str(section.get("method", "torchtune"))
    if method not in ("torchtune", "save_on_cpu"):
        raise ValueError(f"activation_offloading.method {method!r}: torchtune or save_on_cpu")
    if section.get("use_streams", False):
        raise ValueError("activation_offloading.use_streams: the capture runs the single-stream form")
    default_min = 1024 if method == "torchtune" else 0
    return method, int(section.get("min_offload_bytes", default_min)), bool(section.get("pin_memory", True))


class HostOffload(torch.autograd.graph.saved_tensors_hooks):
    """Saved tensors copied to memory outside c10's allocator; unpack allocates a c10 copy.

    The host copy has the layout the source's copy has: torchtune's empty_like(activation,
    device="cpu") and save_on_cpu's tensor.cpu() keep a dense tensor's strides (a linear's
    weight.t() stays transposed), save_on_cpu's pinned torch.empty(size) is contiguous; the
    unpack's .to(device) keeps the host copy's strides (empty_like on the "device")."""

    def __init__(self, method, min_bytes, pin_memory):
        contiguous = method == "save_on_cpu" and pin_memory

        def pack(tensor):
            nbytes = tensor.element_size() * tensor.nelement()
            if nbytes == 0 or nbytes < min_bytes:
                return False, tensor
            if method == "torchtune" and isinstance(tensor, (torch.nn.Parameter, torch.nn.Buffer)):
                return False, tensor
            # The copy's layout, worked out on the meta device (no c10 CPU allocation).
            like = torch.empty(tensor.shape, device="meta") if contiguous else torch.empty_like(tensor, device="meta")
            strides = like.stride()
            span = sum((size - 1) * stride for size, stride in zip(tensor.shape, strides)) + 1
            host = torch.frombuffer(bytearray(span * tensor.element_size()), dtype=tensor.dtype)
            host = host.as_strided(tensor.shape, strides)
            host.copy_(tensor)
            return True, host

        def unpack(packed):
            offloaded, tensor = packed
            if not offloaded:
                return tensor
            device = torch.empty_like(tensor)  # .to(device): the host copy's strides
            device.copy_(tensor)
            return device

        super().__init__(pack, unpack)


class _NoOp(torch.autograd.graph.saved_tensors_hooks):
    """torchtune's NoOpManager: saved tensors kept as they are."""

    def __init__(self):
        super().__init__(lambda tensor: tensor, lambda tensor: tensor)


def context(model, cfg):
    """A function returning the context the model's forward runs under: nullcontext without
    offloading. For torchtune, the model's output head (lm_head) and everything after it in the
    forward (the loss, which torchtune computes outside the context) save as they are."""
    found = settings(cfg)
    if found is None:
        return contextlib.nullcontext
    method, min_bytes, pin_memory = found
    if method == "torchtune":
        head = getattr(model, "lm_head", None)
        if head is None:
            raise ValueError("activation_offloading.method torchtune: the model has no lm_head to exclude")
        noop = _NoOp()
        entered = []

        def enter_noop(*args):
            if not entered:  # once per forward (a chunked loss calls the head per chunk)
                noop.__enter__()
                entered.append(True)
        head.register_forward_pre_hook(enter_noop)

        @contextlib.contextmanager
        def run():
            with HostOffload(method, min_bytes, pin_memory):
                try:
                    yield
                finally:
                    if entered:  # entered at the head; closed with the forward
                        noop.__exit__(None, None, None)
                        entered.clear()
        return run
    return lambda: HostOffload(method, min_bytes, pin_memory)
