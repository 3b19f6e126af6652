"""Networks for Ansor (TVM 0.19 Relay): the ``tvm.relay.testing`` models by name, a user's ONNX file, and
the Ansor tasks of a network on this machine's CPU.

    from tclm.networks import relay_network, extract_ansor_tasks
    net = relay_network("resnet-18")                      # batch 1, 224x224, float32, random weights
    tasks, weights = extract_ansor_tasks(net, target)     # Ansor's search tasks and their weights

Weights are random (``relay.testing`` initialises them; nothing is downloaded): a schedule's speed does
not depend on the weights' values, only on shapes and layouts. ``tiny`` is a three-operator network
(conv2d + relu, global pooling, dense) for the end-to-end tests: a handful of small tasks that tune
and compile in seconds.

Task extraction and compilation run with ``TOPHUB_LOCATION=NONE`` unless the user set it
(:func:`without_tophub`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Dict, List, Tuple

#: Network names ``relay_network`` knows, with what they are (``--help`` lists them).
NETWORKS = {
    "resnet-18": "ResNet-18 (relay.testing.resnet, 24 Ansor tasks on x86)",
    "resnet-34": "ResNet-34",
    "resnet-50": "ResNet-50",
    "mobilenet": "MobileNet v1 (relay.testing.mobilenet, 22 Ansor tasks on x86)",
    "squeezenet": "SqueezeNet 1.1",
    "vgg-16": "VGG-16",
    "densenet-121": "DenseNet-121",
    "inception-v3": "Inception v3 (299x299 input)",
    "tiny": "conv2d 3x3 (8 -> 16 channels, 16x16) + relu, global average pooling, dense 16 -> 10: for tests",
}


@dataclass
class Network:
    """A Relay network ready for task extraction and compilation."""

    name: str
    mod: object  # tvm.IRModule
    params: Dict[str, object]
    inputs: Dict[str, Tuple[Tuple[int, ...], str]] = field(default_factory=dict)  # name -> (shape, dtype)


def _tiny(batch: int, dtype: str):
    from tvm import relay
    from tvm.relay import testing

    data = relay.var("data", shape=(batch, 8, 16, 16), dtype=dtype)
    w = relay.var("conv_weight", shape=(16, 8, 3, 3), dtype=dtype)
    y = relay.nn.relu(relay.nn.conv2d(data, w, padding=(1, 1), channels=16, kernel_size=(3, 3)))
    y = relay.nn.batch_flatten(relay.nn.global_avg_pool2d(y))
    fc = relay.var("fc_weight", shape=(10, 16), dtype=dtype)
    y = relay.nn.dense(y, fc)
    func = relay.Function(relay.analysis.free_vars(y), y)
    mod, params = testing.create_workload(func)
    return mod, params, (batch, 8, 16, 16)


def relay_network(name: str, batch: int = 1, dtype: str = "float32") -> Network:
    """The named ``relay.testing`` network (NCHW, ``batch`` x 3 x 224 x 224; 299 x 299 for
    inception-v3). ValueError for an unknown name, listing the known ones."""
    from tvm.relay import testing

    image = (batch, 3, 224, 224)
    if name.startswith("resnet-") and name[7:].isdigit():
        mod, params = testing.resnet.get_workload(num_layers=int(name[7:]), batch_size=batch, dtype=dtype)
    elif name == "mobilenet":
        mod, params = testing.mobilenet.get_workload(batch_size=batch, dtype=dtype)
    elif name == "squeezenet":
        mod, params = testing.squeezenet.get_workload(batch_size=batch, version="1.1", dtype=dtype)
    elif name.startswith("vgg-") and name[4:].isdigit():
        mod, params = testing.vgg.get_workload(num_layers=int(name[4:]), batch_size=batch, dtype=dtype)
    elif name.startswith("densenet-") and name[9:].isdigit():
        mod, params = testing.densenet.get_workload(densenet_size=int(name[9:]), batch_size=batch, dtype=dtype)
    elif name == "inception-v3":
        image = (batch, 3, 299, 299)
        mod, params = testing.inception_v3.get_workload(batch_size=batch, dtype=dtype)
    elif name == "tiny":
        mod, params, image = _tiny(batch, dtype)
    else:
        raise ValueError(f"unknown network '{name}' (known: {', '.join(NETWORKS)}; or give an ONNX file)")
    return Network(name=name, mod=mod, params=params, inputs={"data": (image, dtype)})


def parse_input_spec(spec: str) -> Tuple[str, Tuple[int, ...]]:
    """'NAME:1x3x224x224' (or with commas) -> ('NAME', (1, 3, 224, 224)); ValueError naming the spec."""
    name, sep, dims = spec.rpartition(":")
    try:
        shape = tuple(int(d) for d in dims.replace(",", "x").split("x"))
    except ValueError:
        shape = ()
    if not sep or not name or not shape or any(d <= 0 for d in shape):
        raise ValueError(f"--input '{spec}': expected NAME:SHAPE, e.g. data:1x3x224x224")
    return name, shape


def onnx_network(path: str, inputs: List[str], dtype: str = "float32") -> Network:
    """A network imported from an ONNX file; `inputs` are 'NAME:SHAPE' specs (the model's own shapes
    when empty, which must then be static)."""
    import onnx
    from tvm import relay

    if not os.path.isfile(path):
        raise ValueError(f"ONNX file '{path}' does not exist")
    model = onnx.load(path)
    shapes = dict(parse_input_spec(s) for s in inputs)
    mod, params = relay.frontend.from_onnx(model, shape=shapes or None, freeze_params=True)
    if not shapes:
        init = {i.name for i in model.graph.initializer}
        for inp in model.graph.input:
            if inp.name in init:
                continue
            dims = [d.dim_value for d in inp.type.tensor_type.shape.dim]
            if not dims or any(d <= 0 for d in dims):
                raise ValueError(f"{path}: input '{inp.name}' has a dynamic shape; give --input {inp.name}:SHAPE")
            shapes[inp.name] = tuple(dims)
    name = os.path.splitext(os.path.basename(path))[0]
    return Network(name=name, mod=mod, params=params, inputs={k: (v, dtype) for k, v in shapes.items()})


def without_tophub() -> None:
    """TOPHUB_LOCATION=NONE unless the user set it, for every extraction and compile of a network. TVM
    otherwise fetches TopHub's AutoTVM configurations each time: offline it retries the download (for
    as long as the connection takes to fail), and online the operators Ansor did not tune would be
    built with them in one process and without them in another that set this, so a run's own compile
    and a later one (tune-bench's latency batch) could differ. Ansor does not use TopHub."""
    os.environ.setdefault("TOPHUB_LOCATION", "NONE")


def extract_ansor_tasks(net: Network, target, hardware_params=None) -> Tuple[list, List[int]]:
    """Ansor's search tasks of `net` for `target` and their weights (how often each occurs). With
    `hardware_params` (auto_scheduler.HardwareParams) every task is remade with them: extraction
    otherwise takes the core count from the runtime's thread pool (1 on a 2-vCPU machine), not from
    the target's -num-cores, and the search sizes its parallel loops for that count."""
    without_tophub()
    from tvm import auto_scheduler

    tasks, weights = auto_scheduler.extract_tasks(net.mod["main"], net.params, target)
    if hardware_params is not None:
        tasks = [auto_scheduler.SearchTask(compute_dag=t.compute_dag, workload_key=t.workload_key, target=t.target,
                                           target_host=t.target_host, hardware_params=hardware_params,
                                           layout_rewrite_option=t.layout_rewrite_option,
                                           task_inputs=list(t.task_input_names), desc=t.desc) for t in tasks]
    return tasks, [int(w) for w in weights]
