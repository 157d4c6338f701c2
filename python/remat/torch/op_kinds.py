"""One table: aten operator -> remat node kind, each group with the reason it is there.

The kind tells solvers what an operator is (the min-cut solver, for instance, bans recomputing
compute-bound ops). Views are found from the operator schema (an output that aliases an input
without writing it); everything below is looked up by the overload packet's name, e.g. "mm" for
``aten.mm.default``. An operator in no group is "other".
"""

# scaled_dot_product_attention's fused kernels, by device and backend: two matrix products per
# query-key pair forward, five backward (cost.py counts them).
FUSED_ATTENTION = frozenset({
    "_scaled_dot_product_flash_attention", "_scaled_dot_product_flash_attention_backward",
    "_scaled_dot_product_efficient_attention", "_scaled_dot_product_efficient_attention_backward",
    "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_cudnn_attention_backward",
    "_scaled_dot_product_flash_attention_for_cpu",
    "_scaled_dot_product_flash_attention_for_cpu_backward",
    "_scaled_dot_product_fused_attention_overrideable",
    "_scaled_dot_product_fused_attention_overrideable_backward",
})

# Matrix products and convolutions: their time grows with a product of dimensions, not with the
# bytes they touch, so they dominate the step and recomputing them is expensive.
COMPUTE = frozenset({
    "mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "convolution", "convolution_backward",
    "_convolution", "cudnn_convolution", "mkldnn_convolution", "_scaled_dot_product_attention",
}) | FUSED_ATTENTION

# Normalizations: a statistics pass over each row (layer and group norm) or channel (batch norm),
# then a pass that rescales by it; their backward reduces twice more. The min-cut paper (§3.1,
# assumption 3) lists layer norm with matmul and convolution as compute-bound ops never worth
# recomputing, and functorch's min-cut partitioner neither recomputes nor fuses any normalization.
# They are "compute" ops: not recomputed, and not fused with a neighbour, so a value a
# normalization reads is materialised anyway. Their FLOPs are counted as a reduction's (cost.py).
NORMALIZATION = frozenset({
    "native_batch_norm", "native_batch_norm_backward", "_native_batch_norm_legit",
    "_native_batch_norm_legit_functional", "native_layer_norm", "native_layer_norm_backward",
    "native_group_norm", "native_group_norm_backward",
})

# Whole-tensor reductions and normalizations: read a tensor, write something smaller or rescale
# it with statistics computed over it; memory-bound but not fusible into a neighbour.
REDUCTION = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "norm",
    "linalg_vector_norm", "_softmax", "_log_softmax", "_softmax_backward_data",
    "_log_softmax_backward_data", "nll_loss_forward", "nll_loss_backward", "nll_loss2d_forward", "nll_loss2d_backward",
    "mse_loss", "mse_loss_backward", "cumsum", "max_pool2d_with_indices",
    "max_pool2d_with_indices_backward", "avg_pool2d", "avg_pool2d_backward",
    "_adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward", "embedding_dense_backward",
})

# Operators that draw from the random number generator: running one twice gives a different
# result and moves the generator. Their first computations run in their traced order (effects.py
# chains them); one that writes nothing can be recomputed by replaying the generator state saved
# before its first computation (execute.py), which gives the same result and leaves the generator
# where it was.
RANDOM = frozenset({
    "bernoulli", "bernoulli_", "native_dropout", "rand", "rand_like", "randn", "randn_like",
    "randint", "randint_like", "randperm", "normal", "normal_", "uniform", "uniform_",
    "exponential_", "geometric_", "log_normal_", "cauchy_", "random_", "multinomial",
    "rrelu_with_noise",
})

# Elementwise arithmetic and activations: one output element per input element, cheap, and the
# first thing worth recomputing.
POINTWISE = frozenset({
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sqrt", "rsqrt", "reciprocal", "abs",
    "relu", "gelu", "gelu_backward", "silu", "silu_backward", "sigmoid", "sigmoid_backward",
    "tanh", "tanh_backward", "threshold", "threshold_backward", "hardtanh", "hardtanh_backward",
    "leaky_relu", "leaky_relu_backward", "elu", "elu_backward", "erf", "sin", "cos", "clamp",
    "clamp_min", "clamp_max", "where", "masked_fill", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_not", "logical_and", "bitwise_not", "_to_copy", "clone", "copy", "fill", "zeros_like",
    "ones_like", "full_like", "empty_like", "empty", "native_dropout_backward", "embedding",
    "maximum", "minimum", "lerp", "addcmul", "addcdiv", "sign", "floor", "ceil", "round", "rsub",
    "cat", "stack", "constant_pad_nd", "index_select", "gather", "scatter",
    "index", "index_put", "slice_backward", "select_backward", "expand_copy", "tril", "triu",
}) | frozenset({
    # Tensors of one value (the zeros a loss's backward scatters its gradient into): a compiler
    # computes each element where a kernel reads it (Inductor inlines them into their readers),
    # so they are pointwise code fused with their readers, not a tensor of their own.
    "full", "zeros", "ones",
})

# Reductions a compiler fuses with the elementwise code around them (Inductor makes one kernel of a
# softmax's max, subtract, exp, sum and divide): a value passed only between these and pointwise
# ops or views need not be stored. The partitioner plans such a chain as one node (partition.py).
FUSIBLE_REDUCTION = frozenset({
    "sum", "mean", "amax", "amin", "max", "min", "prod", "var", "std", "var_mean", "norm",
    "linalg_vector_norm", "_softmax", "_log_softmax", "_softmax_backward_data",
    "_log_softmax_backward_data",
})

# Operators whose kernel reads autograd's grad mode: mkldnn's LSTM/GRU layer (the CPU path of
# nn.LSTM and nn.GRU) returns the workspace its backward reads only when grad mode is on. make_fx
# traces the step with grad mode on; remat runs the traced graph under no_grad, so these calls run
# with grad mode on (on detached arguments: no autograd graph is recorded; execute.traced_call).
READS_GRAD_MODE = frozenset({"mkldnn_rnn_layer"})


# Operators whose hidden side effect (not declared in the schema) writes some arguments, by
# argument position, when a condition on the arguments holds. Training-mode batch norm updates its
# running statistics in place; it computes its output from the batch statistics, so a
# recomputation that passes no running statistics gives the same output without the update.
# The same holds for the backend variants PyTorch 2.x may trace instead; when their schema does
# not accept None there, the recomputation cannot drop the update and they stay side effects.
def _training(args):
    return len(args) > 5 and bool(args[5])


HIDDEN_WRITES = {
    "native_batch_norm": ((3, 4), _training),
    "_native_batch_norm_legit": ((3, 4), _training),
    "cudnn_batch_norm": ((3, 4), _training),
    "miopen_batch_norm": ((3, 4), _training),
}


def kind_of(packet_name, is_view):
    """The remat kind ("compute", "pointwise", ...) of an aten operator."""
    if is_view:
        return "view"
    if packet_name in RANDOM:
        return "random"
    if packet_name in COMPUTE or packet_name in NORMALIZATION:
        return "compute"
    if packet_name in REDUCTION:
        return "reduction"
    base = packet_name[:-1] if packet_name.endswith("_") else packet_name
    if base in POINTWISE or packet_name in POINTWISE:
        return "pointwise"
    return "other"


def is_fusible(packet_name, kind):
    """Whether a compiler fuses the call with its pointwise neighbours (pointwise ops, views and
    the simple reductions of FUSIBLE_REDUCTION): its result need not be stored between them."""
    return kind in ("pointwise", "view") or (kind == "reduction"
                                             and packet_name in FUSIBLE_REDUCTION)


def is_random(packet_name):
    return packet_name in RANDOM


def reads_grad_mode(packet_name):
    return packet_name in READS_GRAD_MODE


def hidden_writes(packet_name, args):
    """Positions of arguments the operator writes although its schema does not say so."""
    entry = HIDDEN_WRITES.get(packet_name)
    if entry is None:
        return ()
    positions, condition = entry
    return tuple(p for p in positions if condition(args) and p < len(args) and args[p] is not None)
