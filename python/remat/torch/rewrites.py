"""Rewrites of the captured fx graph that make more of it recomputable, before it is measured.

- In-place calls whose write nobody else can observe (relu_ on a fresh activation, a residual
  add_) become their out-of-place overload. So does a random one with an out-of-place overload
  that draws the same numbers (bernoulli_ on the fresh tensor a CPU dropout fills), so that it
  writes nothing and can be recomputed by replaying the generator (effects.py, execute.py).
- ones_like/zeros_like/full_like/empty_like of a contiguous tensor become ones/zeros/full/empty
  (they read only metadata), so the gradient seed, and the tensor a dropout mask is drawn into,
  are nodes without inputs.
- Sizes that depend on the data (the rows a boolean mask selects, nonzero, unique): make_fx over
  fake tensors names each an unbacked symbol and reads it with sym_size calls; they become the
  numbers of the recorded run, and the calls that make such sizes are returned so that every run
  of a plan checks them (execute.py).
- An attention call whose mask is a constant causal mask gets is_causal=True and no mask, as
  eager runs it (causal_masks_to_is_causal); with no mask it reads grouped-query key and value
  heads shared, not repeated (native_grouped_query_attention).
- A convolution_backward that computes the input's gradient and the weight's (or bias's) becomes
  two calls, one for each, so the weight gradient, resident to the end of the step once made, can
  be scheduled later than the input gradient the rest of the backward needs.
"""

import operator

import torch
import torch.fx as fx

from torch.fx.node import map_arg

from remat.torch import _compat, effects, op_kinds


def _out_of_place(target):
    """The out-of-place overload of an in-place aten overload (relu_ -> relu), or None."""
    name = _compat.packet_name(target)
    if not name.endswith("_") or name.endswith("__"):
        return None
    packet = getattr(torch.ops.aten, name[:-1], None)
    overload = getattr(packet, _compat.overload_name(target), None) if packet is not None else None
    schema = _compat.schema_of(overload) if overload is not None else None
    if schema is None:
        return None
    if any(a.alias_info is not None and a.alias_info.is_write for a in schema.arguments):
        return None
    return overload


# In-place random overloads -> (out-of-place overload, defaults of trailing positional arguments
# the out-of-place schema requires). bernoulli.p fills a fresh contiguous tensor with
# bernoulli_.float's draws, in the same order, when the tensor bernoulli_ writes is contiguous
# (ATen implements it as empty_like(self).bernoulli_(p)); test_torch_random.py checks it bitwise.
# Other random in-place calls are not rewritten: they stay side effects, run once.
_RANDOM_OUT_OF_PLACE = {("bernoulli_", "float"): (("bernoulli", "p"), (0.5,))}


def _random_out_of_place(n, run):
    """(out-of-place overload, args) for an in-place random call, or (None, None)."""
    entry = _RANDOM_OUT_OF_PLACE.get((_compat.packet_name(n.target),
                                      _compat.overload_name(n.target)))
    written = run.env.get(n.args[0]) if n.args and isinstance(n.args[0], fx.Node) else None
    if entry is None or not isinstance(written, torch.Tensor) or not written.is_contiguous():
        return None, None
    if any(key != "generator" for key in n.kwargs):  # arguments by name: keep it as traced
        return None, None
    (packet, overload), defaults = entry
    target = getattr(getattr(torch.ops.aten, packet, None), overload, None)
    if target is None:
        return None, None
    args = tuple(n.args) + defaults[max(0, len(n.args) - 1):]
    return target, args


def rewrite_private_inplace(gm, run):
    """Rewrites in-place calls whose write no other reader can see to their out-of-place form.

    A write to storage S at position m is private when S is not a graph input's storage and no
    value on S made before m is read after m (the readers after m all read the in-place result,
    which the out-of-place result replaces). A random call is rewritten only to an out-of-place
    overload that draws the same numbers (_RANDOM_OUT_OF_PLACE).
    """
    nodes = list(gm.graph.nodes)
    position = {n: i for i, n in enumerate(nodes)}
    storage = {n: run.storage(n)[0] for n in nodes}
    input_storages = {storage[n] for n in nodes if n.op in ("placeholder", "get_attr")}
    on_storage = {}
    for n in nodes:
        if storage[n] is not None:
            on_storage.setdefault(storage[n], []).append(n)
    rewritten = []
    for n in nodes:
        if n.op != "call_function" or not run.writes.get(n):
            continue
        if not isinstance(run.env.get(n), torch.Tensor):
            continue
        args = n.args
        if op_kinds.is_random(_compat.packet_name(n.target)):
            replacement, args = _random_out_of_place(n, run)
        else:
            replacement = _out_of_place(n.target)
        if replacement is None:
            continue
        if effects.hidden_write_nodes(n):
            continue
        written = {storage[w] for w in run.writes[n]}
        if None in written or written & input_storages or len(written) != 1:
            continue
        m = position[n]
        seen_later = any(position[u] > m
                         for s in written for v in on_storage.get(s, []) if position[v] < m
                         for u in v.users)
        if not seen_later:
            n.target, n.args = replacement, args
            rewritten.append(n)
    if rewritten:
        gm.recompile()
        _move_storages(nodes, position, rewritten, run)
    return bool(rewritten)


def _move_storages(nodes, position, rewritten, run):
    """Updates `run` as if the rewritten graph had run: each rewritten call now makes a fresh
    compact storage, which the values made from its result (views, later in-place results) share
    instead of the storage it wrote; and it writes nothing. Running the step again would tell the
    same, at the cost of another step."""
    # storage key -> (position, fx node, element) of every tensor on it, in graph order, kept up
    # to date as storages move: each rewrite visits the values of one storage, not the graph.
    on_storage = {}
    for i, later in enumerate(nodes):
        for element in _tensor_elements(run.env.get(later)):
            on_storage.setdefault(run.storage(later, element)[0], []).append((i, later, element))
    for n in rewritten:
        m = position[n]
        written = run.storage(run.writes[n][0])[0]
        result = run.env[n]
        nbytes = result.numel() * result.element_size()
        moved = (("rewritten", n.name), nbytes) if nbytes else (None, 0)
        values = on_storage.get(written, [])
        on_storage[written] = [v for v in values if v[0] < m]
        later_values = [v for v in values if v[0] >= m]
        for _, later, element in later_values:
            run.storage_override[(later, element)] = moved
        on_storage.setdefault(moved[0], []).extend(later_values)
        run.writes[n] = []


def _tensor_elements(value):
    if isinstance(value, torch.Tensor):
        return [None]
    if isinstance(value, (tuple, list)):
        return [i for i, x in enumerate(value) if isinstance(x, torch.Tensor)]
    return []


# `ones_like(x)` and friends read only x's metadata. Written as plain factories they have no
# inputs, so the gradient seed `ones_like(loss)` becomes a node without inputs, as a tangent input
# is in AOTAutograd's joint graphs (the min-cut solver looks for such seeds), and no value is kept
# alive only to be the template of a factory.
# An empty_like(x) a dropout draws its mask into becomes a node without inputs, so recomputing the
# mask does not need x. Packet -> (factory overload, position of the fill value or None).
_LIKE_FACTORIES = {"ones_like": (("ones", "default"), None),
                   "zeros_like": (("zeros", "default"), None),
                   "full_like": (("full", "default"), 1),
                   "empty_like": (("empty", "memory_format"), None)}


def rewrite_like_factories(gm, run):
    """Rewrites ones_like/zeros_like/full_like/empty_like as ones/zeros/full/empty where the
    result is contiguous either way (a contiguous template, or memory_format=contiguous_format)."""
    changed = False
    for n in gm.graph.nodes:
        if n.op != "call_function" or not isinstance(n.args[0] if n.args else None, fx.Node):
            continue
        entry = _LIKE_FACTORIES.get(_compat.packet_name(n.target))
        template = run.env.get(n.args[0])
        if entry is None or _compat.overload_name(n.target) != "default":
            continue
        if not isinstance(template, torch.Tensor):
            continue
        memory_format = n.kwargs.get("memory_format")
        contiguous = memory_format is torch.contiguous_format or (
            memory_format in (None, torch.preserve_format) and template.is_contiguous())
        if not contiguous:
            continue
        (factory, overload), fill_position = entry
        kwargs = {
            "dtype": n.kwargs.get("dtype") or template.dtype,
            "layout": n.kwargs.get("layout") or template.layout,
            "device": n.kwargs.get("device") or template.device,
            "pin_memory": bool(n.kwargs.get("pin_memory") or False),
        }
        args = (list(template.shape),)
        if fill_position is not None:
            args += (n.args[fill_position],)
        n.target = getattr(getattr(torch.ops.aten, factory), overload)
        n.args, n.kwargs = args, kwargs
        changed = True
    if changed:
        gm.recompile()
    return changed


def split_convolution_backward(gm):
    """Rewrites convolution_backward(..., output_mask=[True, w, b]) with w or b set as two calls:
    output_mask [True, False, False] for the input's gradient and [False, w, b] for the
    parameters'. Each computes only what its mask asks for, the same numbers as the joint call
    (ATen runs the same kernels; the gradient tests of test_torch.py compare bitwise), and its
    cost (cost.py) is its share of the joint call's.

    Why: a weight gradient is a graph output, resident from when it is made to the end of the
    step. Made with the input's gradient, it is made as early as the backward reaches its layer:
    on ResNet-18 (batch 32, 128 px) layer 4's weight gradients were resident through the
    stem's backward, where the plan's peak was. Split, the solver may make them later, from
    inputs that are small there.
    """
    changed = False
    for n in list(gm.graph.nodes):
        if n.op != "call_function" or _compat.packet_name(n.target) != "convolution_backward":
            continue
        if len(n.args) != 11 or n.kwargs:  # output_mask by name: keep it as traced
            continue
        mask = n.args[10]
        if not mask[0] or not (mask[1] or mask[2]):
            continue
        if any(u.target is not operator.getitem or not isinstance(u.args[1], int) for u in n.users):
            continue
        with gm.graph.inserting_before(n):
            input_grad = gm.graph.call_function(n.target, n.args[:10] + ([True, False, False],))
            param_grads = gm.graph.call_function(
                n.target, n.args[:10] + ([False, bool(mask[1]), bool(mask[2])],))
        for user in list(n.users):
            user.replace_input_with(n, input_grad if user.args[1] == 0 else param_grads)
        gm.graph.erase_node(n)
        changed = True
    if changed:
        gm.recompile()
    return changed


def specialize_data_dependent_sizes(gm, run):
    """Writes the recorded run's numbers in place of the symbolic sizes make_fx gave the sizes
    that depend on tensor values, drops the runtime asserts on them, and returns {fx call: shapes
    of its tensor outputs} for the calls that make such sizes. The graph then holds one batch's
    sizes, as it holds its shapes: a batch whose data gives other sizes must be refused (or
    traced again), which a check of these calls' outputs does before anything reads them."""
    made = {n: _tensor_shapes(run.env.get(n)) for n in gm.graph.nodes
            if n.op == "call_function" and _compat.unbacked_bindings(n)}
    scalars = [n for n in gm.graph.nodes if n.op == "call_function" and (
        n.target in _compat.SIZE_ASSERTS or _compat.is_symbolic_scalar(n.meta.get("val")))]
    for n in scalars:
        value = run.env.get(n)
        for user in list(n.users):
            user.args = map_arg(user.args, lambda a, n=n, value=value: value if a is n else a)
            user.kwargs = map_arg(user.kwargs, lambda a, n=n, value=value: value if a is n else a)
    for n in reversed(scalars):
        gm.graph.erase_node(n)
    if scalars:
        gm.recompile()
    return made


def _tensor_shapes(value):
    return tuple(tuple(t.shape) for t in _compat.tree_flatten(value)[0]
                 if isinstance(t, torch.Tensor))


# A constant mask larger than this is not evaluated (its one evaluation would cost more memory
# than the trace on fake tensors takes).
_CAUSAL_MASK_LIMIT = 1 << 28


def causal_masks_to_is_causal(gm):
    """Attention calls (scaled_dot_product_attention's fused kernels) whose mask is a constant
    causal mask get is_causal=True and no mask; the mask's calls, unread then, are removed.
    Returns whether the graph changed.

    Why: Hugging Face builds its causal mask as a tensor whenever it sees a fake tensor (make_fx
    traces on fake tensors), where eager PyTorch runs the same model with is_causal=True. The mask
    makes the attention kernels read a bias and skip no block: on a GPU they run several times
    slower than eager's (bench/gpu_executor_profile.py measures them). The mask is
    replaced only where its values, computed once from its calls (which read no input of the
    step), are exactly the lower triangle is_causal means (query i sees keys 0..i): the same
    attention, as eager computes it.
    """
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    readers = {}  # mask -> [(attention call, the mask's argument name)]
    for n in gm.graph.nodes:
        found = _mask_argument(n)
        if found is not None:
            readers.setdefault(found[0], []).append((n, found[1]))
    changed = False
    for mask, calls in readers.items():
        if not _is_causal_mask(mask, calls[0][0], position):
            continue
        # Every kernel reading it, forward and backward alike. CUDA's memory-efficient and cuDNN
        # backward declare the mask a Tensor, not an optional one; under is_causal eager passes
        # them none (an undefined tensor), which None is here.
        for n, name in calls:
            _set_argument(n, name, None)
            _set_argument(n, "is_causal", True)
        _erase_unread(mask, position)
        changed = True
    if changed:
        gm.recompile()
    return changed


def _mask_argument(n):
    """(mask node, its argument name) of a fused attention call given a mask and not causal
    already, else None."""
    if n.op != "call_function" or _compat.packet_name(n.target) not in op_kinds.FUSED_ATTENTION:
        return None
    schema = getattr(n.target, "_schema", None)
    if schema is None:
        return None
    arguments = {a.name: a for a in schema.arguments}
    name = next((m for m in ("attn_mask", "attn_bias") if m in arguments), None)
    if name is None or "is_causal" not in arguments:
        return None
    values = _arguments_by_name(n, schema)
    mask = values.get(name)
    if not isinstance(mask, fx.Node) or values.get("is_causal"):
        return None
    return mask, name


def _arguments_by_name(n, schema):
    values = {a.name: v for a, v in zip(schema.arguments, n.args)}
    values.update(n.kwargs)
    return values


def _set_argument(n, name, value):
    names = [a.name for a in n.target._schema.arguments]
    index = names.index(name)
    if index < len(n.args):
        n.args = n.args[:index] + (value,) + n.args[index + 1:]
    else:
        n.kwargs = {**n.kwargs, name: value}


def _is_causal_mask(mask, attention, position):
    """Whether `mask` is computed from constants alone and equals is_causal's lower triangle for
    the query and key lengths of `attention` (a boolean mask: True where attended; an additive
    one: 0 there and -inf elsewhere)."""
    arguments = _arguments_by_name(attention, attention.target._schema)
    query, key = arguments.get("query"), arguments.get("key")
    shapes = [getattr(x, "meta", {}).get("val") for x in (query, key, mask)]
    if any(not isinstance(s, torch.Tensor) for s in shapes):
        return False
    if shapes[2].numel() > _CAUSAL_MASK_LIMIT:
        return False
    value = _constant_value(mask, position)
    if value is None or value.dim() < 2:
        return False
    lower = torch.ones(shapes[0].shape[-2], shapes[1].shape[-2], dtype=torch.bool).tril()
    if tuple(value.shape[-2:]) != tuple(lower.shape):
        return False
    if value.dtype == torch.bool:
        return bool((value == lower).all())
    attended, masked = value == 0, value == float("-inf")
    return bool((attended | masked).all() and (attended == lower).all())


def _constant_value(node, position):
    """The value of `node` computed on the CPU from its calls, or None when an input of the step
    (or anything but a call) is among its ancestors, or a random call (it would draw from the
    caller's generator)."""
    calls, stack = set(), [node]
    while stack:
        x = stack.pop()
        if x in calls:
            continue
        if x.op != "call_function" or op_kinds.is_random(_compat.packet_name(x.target)):
            return None
        calls.add(x)
        stack.extend(x.all_input_nodes)
    values = {}

    def on_cpu(a):
        return torch.device("cpu") if isinstance(a, torch.device) else a

    with _compat.outside_dispatch_modes(), torch.no_grad():
        for x in sorted(calls, key=position.get):
            args = map_arg(x.args, values.get)
            kwargs = {k: on_cpu(v) for k, v in map_arg(x.kwargs, values.get).items()}
            try:
                values[x] = x.target(*[on_cpu(a) for a in args], **kwargs)
            except Exception:  # a call that needs its device: leave the mask as traced
                return None
    result = values[node]
    return result if isinstance(result, torch.Tensor) else None


def _erase_unread(mask, position):
    """Erases `mask` and the calls only it read, once nothing reads them."""
    pending = [mask]
    while pending:
        x = max(pending, key=position.get)
        pending.remove(x)
        if x.op != "call_function" or x.users or getattr(x, "_erased", False):
            continue
        inputs = list(x.all_input_nodes)
        x.graph.erase_node(x)
        pending.extend(i for i in inputs if i not in pending)


# Kernels known to read grouped-query keys and values unrepeated (more query heads than key and
# value heads), forward and backward, as eager's scaled_dot_product_attention(enable_gqa=True)
# calls them.
_NATIVE_GQA = {"_scaled_dot_product_flash_attention_for_cpu":
               "_scaled_dot_product_flash_attention_for_cpu_backward"}


def native_grouped_query_attention(gm):
    """Attention calls (and their backward) whose key and value are shared heads repeated for
    each query head (unsqueeze, expand, clone, view: Hugging Face's repeat_kv) read the shared
    heads instead, where the kernel takes them so; the backward's key and value gradients, then
    of the shared heads' shape, replace the sums over the repeats. Returns whether the graph
    changed.

    Why: Hugging Face repeats the heads whenever it builds a mask (on fake tensors, see
    causal_masks_to_is_causal), where eager passes enable_gqa=True: the repeated copies are
    saved for the backward (the plan holds them) and the kernels read them all. Where a mask
    stays (padding), eager repeats them too, and so does the trace: the same numbers as eager.
    """
    position = {n: i for i, n in enumerate(gm.graph.nodes)}
    changed = False
    for forward in list(gm.graph.nodes):
        if forward.op != "call_function" \
                or _compat.packet_name(forward.target) not in _NATIVE_GQA:
            continue
        plan = _shared_heads_plan(forward)
        if plan is None:
            continue
        (key, value), (shared_key, shared_value), backwards, sums = plan
        for call in [forward] + backwards:
            _set_argument(call, "key", shared_key)
            _set_argument(call, "value", shared_value)
        for gradient, repeated_sum in sums:
            repeated_sum.replace_all_uses_with(gradient)
        for dead in [s for _, s in sums] + [key, value]:
            _erase_unread(dead, position)
        changed = True
    if changed:
        gm.recompile()
    return changed


def _shared_heads_plan(forward):
    """((repeated key, value), (shared key, value), backward calls, [(backward gradient of the
    shared heads, the sum over the repeats it replaces)]) for a forward attention call whose
    key and value are repeated shared heads read by it and its backward calls alone, else None."""
    arguments = _arguments_by_name(forward, forward.target._schema)
    if arguments.get("attn_mask") is not None:  # eager repeats the heads under a mask too
        return None
    repeated = (arguments.get("key"), arguments.get("value"))
    shared = tuple(_repeated_heads_of(x) for x in repeated)
    if any(s is None for s in shared):
        return None
    backward_packet = _NATIVE_GQA[_compat.packet_name(forward.target)]
    readers = set(repeated[0].users) | set(repeated[1].users)
    backwards = [n for n in readers if n is not forward]
    if any(_compat.packet_name(n.target) != backward_packet for n in backwards):
        return None
    sums = []
    for call in backwards:
        named = _arguments_by_name(call, call.target._schema)
        if (named.get("key"), named.get("value")) != repeated:
            return None
        for index, heads in ((1, 0), (2, 1)):
            gradient = next((u for u in call.users if u.target is operator.getitem
                             and u.args[1] == index), None)
            repeated_sum = _sum_over_repeats(gradient, shared[heads], repeated[heads])
            if gradient is not None and repeated_sum is None:
                return None
            if gradient is not None:
                sums.append((gradient, repeated_sum))
    return repeated, shared, backwards, sums


def _repeated_heads_of(x):
    """The shared heads [b, h, s, d] that `x` repeats as [b, h * r, s, d] (a view of an expand,
    or of its clone, of unsqueeze(heads, 2)), else None."""
    chain = []
    for packets in (("_unsafe_view", "view", "reshape"), ("clone",), ("expand",), ("unsqueeze",)):
        if not isinstance(x, fx.Node) or x.op != "call_function":
            return None
        if _compat.packet_name(x.target) not in packets:
            if packets == ("clone",):  # a view of an expand where h is 1 needs no copy
                continue
            return None
        chain.append(x)
        x = x.args[0]
    unsqueeze = chain[-1]
    shared, repeated = _meta_val(x), _meta_val(chain[0])
    if shared is None or repeated is None or shared.dim() != 4 or repeated.dim() != 4 \
            or unsqueeze.args[1] != 2 or any(len(n.users) != 1 for n in chain[1:]):
        return None
    b, h, s, d = shared.shape
    if repeated.shape[0] != b or repeated.shape[2:] != shared.shape[2:] \
            or repeated.shape[1] % h or repeated.shape[1] == h:
        return None
    return x


def _sum_over_repeats(gradient, shared_heads, repeated_heads):
    """The squeeze(sum(view(gradient, [b, h, r, s, d]), [2], keepdim=True), 2) that makes the
    shared heads' gradient from the repeated heads' one, when it is the gradient's only reader;
    else None."""
    if gradient is None or len(gradient.users) != 1:
        return None
    view = next(iter(gradient.users))
    shared, repeated, split = (_meta_val(x) for x in (shared_heads, repeated_heads, view))
    if _compat.packet_name(view.target) not in ("view", "_unsafe_view", "reshape") \
            or shared is None or repeated is None or split is None or len(view.users) != 1:
        return None
    b, h, s, d = shared.shape
    if tuple(split.shape) != (b, h, repeated.shape[1] // h, s, d):  # the repeats as in forward
        return None
    total = next(iter(view.users))
    if _compat.packet_name(total.target) != "sum" or list(total.args[1:]) != [[2], True] \
            or total.kwargs or len(total.users) != 1:
        return None
    squeeze = next(iter(total.users))
    if _compat.packet_name(squeeze.target) != "squeeze" or list(squeeze.args[1:]) != [2]:
        return None
    out = _meta_val(squeeze)
    if out is None or out.shape != shared.shape or out.dtype != shared.dtype:
        return None
    return squeeze


def _meta_val(node):
    value = getattr(node, "meta", {}).get("val")
    return value if isinstance(value, torch.Tensor) else None
