# Hand-written attention and softmax in a training step (issue 26's item 6, the training side of
# handwritten_attention_no_grad.py): scores by einsum, a causal mask by comparison and
# torch.where, a second mask by masked_fill, softmax as exp(x - max) / sum in a plain function,
# a SwiGLU MLP; autograd saves the S x S temporaries the backward needs, the locals hold the rest.
# The model is imported from the no-grad case's file, as users import their model from a
# module beside the training script: the capture must follow code that lives in another file.
from handwritten_attention_no_grad import batch, model  # noqa: F401
