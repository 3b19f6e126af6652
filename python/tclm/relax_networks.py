"""Networks for MetaSchedule (apache-tvm 0.26, Relax): ResNet-18, MobileNet v1 and a tiny test network
built in code, or a user's ONNX file.

    from tclm.relax_networks import relax_network, onnx_network
    net = relax_network("resnet-18")          # batch 1, 3x224x224, float32, NCHW, random weights
    net = onnx_network("model.onnx", ["data:1x3x224x224"])
    net.mod, net.params, net.inputs           # IRModule, {name: tvm.runtime.Tensor}, {name: (shape, dtype)}

The networks are written with Relax's BlockBuilder (``relax.op``): a function ``main(data, weights...)``
whose weights are function parameters listed in ``params`` (random values from a fixed seed; nothing
is downloaded: a schedule's speed depends on shapes and layouts, not on the weights' values).
``relax.transform.BindParams("main", params)`` turns them into constants, which
``meta_schedule.relax_integration.extract_tasks`` / ``compile_relax`` do when given ``params``.
Batch normalisation is folded into the convolutions, as in a deployed network: each convolution
has no bias of its own and is followed by a per-channel bias add (+ relu), which Relax's FuseOps fuses
into one task with the convolution (``fused_conv2d_add_relu``).

* ``resnet-18``: ResNet-18 v1 (the torchvision layout: 7x7/2 stem, 3x3/2 max pooling, four stages of
  two basic blocks, 64-512 channels, 1x1/2 projection shortcuts, global average pooling, dense 512 ->
  1000).
* ``mobilenet``: MobileNet v1 (width 1.0, as ``relay.testing.mobilenet``: a 3x3/2 stem and 13
  depthwise-separable blocks, 32-1024 channels, global average pooling, dense 1024 -> 1000).
* ``tiny``: conv2d 3x3 (8 -> 16 channels on 16x16, padding 1) + relu, global average pooling, dense
  16 -> 10: a handful of small tasks that tune and compile in seconds, for the tests.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .networks import parse_input_spec  # noqa: F401 - also part of this module's API (tests, _tune_ms)

#: Network names ``relax_network`` knows, with what they are (``--help`` lists them).
NETWORKS = {
    "resnet-18": "ResNet-18 v1, batch 1, 3x224x224, float32, NCHW",
    "mobilenet": "MobileNet v1, batch 1, 3x224x224, float32, NCHW",
    "tiny": "conv2d 3x3 (8 -> 16 channels, 16x16) + relu, global average pooling, dense 16 -> 10: for tests",
}

InputSpecs = Dict[str, Tuple[Tuple[int, ...], str]]


@dataclass
class Network:
    """A Relax network ready for MetaSchedule's task extraction and ``compile_relax``."""

    name: str
    mod: object  # tvm.IRModule with a Relax function "main"
    params: Dict[str, object]  # weight name -> tvm.runtime.Tensor (empty: the weights are constants)
    inputs: InputSpecs = field(default_factory=dict)  # input name -> (shape, dtype), in argument order


def _tensor_type(shape, dtype):
    """Relax's tensor annotation: ``relax.TensorType`` (apache-tvm 0.26; ``TensorStructInfo`` before)."""
    from tvm import relax

    make = getattr(relax, "TensorType", None) or getattr(relax, "TensorStructInfo")
    return make(tuple(shape), dtype)


def _var_name(var) -> str:
    return str(getattr(var, "name_hint", None) or var.name)


def _var_type(var):
    return getattr(var, "ty", None) or var.struct_info


class _Builder:
    """Collects the weights of a network as Relax parameters with random values (He-scaled for the
    convolutions and the dense layer, small biases)."""

    def __init__(self, dtype: str, seed: int):
        self.dtype = dtype
        self.rng = np.random.default_rng(seed)
        self.vars: list = []
        self.values: Dict[str, np.ndarray] = {}

    def weight(self, name: str, shape: Sequence[int], kind: str = "he"):
        from tvm import relax

        shape = tuple(int(d) for d in shape)
        if name in self.values:
            raise ValueError(f"duplicate weight name {name}")
        if kind == "he":
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else shape[0]
            value = self.rng.normal(0.0, np.sqrt(2.0 / max(1, fan_in)), shape)
        else:  # "small": biases
            value = 0.01 * self.rng.standard_normal(shape)
        var = relax.Var(name, _tensor_type(shape, self.dtype))
        self.vars.append(var)
        self.values[name] = value.astype(self.dtype)
        return var

    # -- layers (emitted into the current BlockBuilder dataflow block) -------------------------
    def conv(self, bb, x, name: str, in_ch: int, out_ch: int, kernel: int, stride: int, groups: int = 1,
             relu: bool = True):
        """conv2d (padding kernel // 2, no bias) + the batch normalisation folded into it (a per-channel
        bias) + relu."""
        from tvm import relax

        w = self.weight(f"{name}_weight", (out_ch, in_ch // groups, kernel, kernel))
        y = bb.emit(relax.op.nn.conv2d(x, w, strides=stride, padding=kernel // 2, groups=groups))
        y = bb.emit(relax.op.add(y, self.weight(f"{name}_bias", (1, out_ch, 1, 1), "small")))
        return bb.emit(relax.op.nn.relu(y)) if relu else y

    def head(self, bb, x, in_ch: int, classes: int):
        """Global average pooling, flatten, dense (with bias)."""
        from tvm import relax

        y = bb.emit(relax.op.nn.adaptive_avg_pool2d(x, output_size=(1, 1)))
        y = bb.emit(relax.op.reshape(y, (-1, in_ch)))
        w = self.weight("fc_weight", (classes, in_ch))
        b = self.weight("fc_bias", (classes,), "small")
        return bb.emit(relax.op.linear(y, w, b))


def _build(name: str, batch: int, dtype: str, image: Tuple[int, int, int], seed: int,
           body: Callable[[object, _Builder, object], object]) -> Network:
    """Runs `body(bb, builder, data)` inside a Relax function main(data, weights...) and returns the
    Network."""
    import tvm
    from tvm import relax

    shape = (batch, *image)
    data = relax.Var("data", _tensor_type(shape, dtype))
    builder = _Builder(dtype, seed)
    bb = relax.BlockBuilder()
    # The weights are only known once the body ran: build the body into a function with data only and
    # the weights as free variables, then make them parameters.
    with bb.function("main"):
        with bb.dataflow():
            out = bb.emit_output(body(bb, builder, data))
        # bb.emit_func_output takes the parameters at the end, so every weight is known here.
        bb.emit_func_output(out, params=[data, *builder.vars])
    mod = bb.get()
    dev = tvm.cpu()
    params = {k: tvm.runtime.tensor(v, dev) for k, v in builder.values.items()}
    return Network(name=name, mod=mod, params=params, inputs={"data": (shape, dtype)})


def _resnet18(bb, nb: _Builder, x):
    from tvm import relax

    y = nb.conv(bb, x, "stem", 3, 64, 7, 2)
    y = bb.emit(relax.op.nn.max_pool2d(y, pool_size=3, strides=2, padding=1))
    in_ch = 64
    for stage, ch in enumerate((64, 128, 256, 512)):
        for block in range(2):
            stride = 2 if stage > 0 and block == 0 else 1
            p = f"layer{stage + 1}_{block}"
            z = nb.conv(bb, y, f"{p}_conv1", in_ch, ch, 3, stride)
            z = nb.conv(bb, z, f"{p}_conv2", ch, ch, 3, 1, relu=False)
            shortcut = y if stride == 1 and in_ch == ch else nb.conv(bb, y, f"{p}_down", in_ch, ch, 1, stride,
                                                                         relu=False)
            y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.add(z, shortcut))))
            in_ch = ch
    return nb.head(bb, y, 512, 1000)


#: MobileNet v1's depthwise-separable blocks: (output channels of the 1x1 convolution, stride).
_MOBILENET_BLOCKS = [(64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2)] + [(512, 1)] * 5 + \
                    [(1024, 2), (1024, 1)]


def _mobilenet(bb, nb: _Builder, x):
    y = nb.conv(bb, x, "stem", 3, 32, 3, 2)
    in_ch = 32
    for i, (ch, stride) in enumerate(_MOBILENET_BLOCKS):
        y = nb.conv(bb, y, f"block{i + 1}_dw", in_ch, in_ch, 3, stride, groups=in_ch)
        y = nb.conv(bb, y, f"block{i + 1}_pw", in_ch, ch, 1, 1)
        in_ch = ch
    return nb.head(bb, y, 1024, 1000)


def _tiny(bb, nb: _Builder, x):
    from tvm import relax

    w = nb.weight("conv_weight", (16, 8, 3, 3))
    y = bb.emit(relax.op.nn.relu(bb.emit(relax.op.nn.conv2d(x, w, padding=1))))
    y = bb.emit(relax.op.nn.adaptive_avg_pool2d(y, output_size=(1, 1)))
    y = bb.emit(relax.op.reshape(y, (-1, 16)))
    fc = nb.weight("fc_weight", (10, 16))
    return bb.emit(relax.op.matmul(y, relax.op.permute_dims(fc)))


def relax_network(name: str, batch: int = 1, dtype: str = "float32", seed: int = 0) -> Network:
    """The named network (see NETWORKS). ValueError for an unknown name, listing the known ones."""
    if name == "resnet-18":
        return _build(name, batch, dtype, (3, 224, 224), seed, _resnet18)
    if name == "mobilenet":
        return _build(name, batch, dtype, (3, 224, 224), seed, _mobilenet)
    if name == "tiny":
        return _build(name, batch, dtype, (8, 16, 16), seed, _tiny)
    raise ValueError(f"unknown network '{name}' (known: {', '.join(NETWORKS)}; or give an ONNX file with --onnx)")


def _static_inputs(mod, path: str) -> InputSpecs:
    """(shape, dtype) of every parameter of mod["main"]; ValueError for a dynamic one."""
    out: InputSpecs = {}
    for p in mod["main"].params:
        sinfo = _var_type(p)
        shape = getattr(sinfo, "shape", None)
        dims = getattr(shape, "values", None)
        try:
            static = tuple(int(d) for d in dims) if dims is not None else None
        except TypeError:  # a symbolic dimension
            static = None
        if static is None:
            raise ValueError(f"{path}: input '{_var_name(p)}' has a dynamic shape ({sinfo}); "
                             f"give --input {_var_name(p)}:SHAPE")
        out[_var_name(p)] = (static, str(sinfo.dtype))
    return out


def onnx_network(path: str, inputs: Optional[List[str]] = None, dtype: str = "float32") -> Network:
    """A network imported from an ONNX file with ``tvm.relax.frontend.onnx.from_onnx`` (weights become
    constants: ``params`` is empty). `inputs` are 'NAME:SHAPE' specs for the graph's inputs (their
    ONNX names); without them the model's own shapes are used, which must then be static. The input
    specs returned carry the Relax parameter names (from_onnx sanitizes names such as 'input.1')."""
    if not os.path.isfile(path):
        raise ValueError(f"ONNX file '{path}' does not exist")
    shapes = dict(parse_input_spec(s) for s in (inputs or []))
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    model = onnx.load(path)
    init = {i.name for i in model.graph.initializer}
    graph_inputs = [i.name for i in model.graph.input if i.name not in init]
    unknown = sorted(set(shapes) - set(graph_inputs))
    if unknown:
        raise ValueError(f"--input {', '.join(unknown)}: {path} has no such input (its inputs: "
                         f"{', '.join(graph_inputs) or 'none'})")
    mod = from_onnx(model, shape_dict=shapes or None, dtype_dict=dtype)
    name = os.path.splitext(os.path.basename(path))[0]
    return Network(name=name, mod=mod, params={}, inputs=_static_inputs(mod, path))


def random_inputs(net: Network, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random input values for `net` (uniform in [0, 1) for floats, small integers otherwise)."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, (shape, dtype) in net.inputs.items():
        if np.dtype(dtype).kind == "f":
            out[k] = rng.random(shape).astype(dtype)
        else:
            out[k] = rng.integers(0, 8, shape).astype(dtype)
    return out
