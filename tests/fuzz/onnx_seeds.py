#!/usr/bin/python3
"""onnx_seeds.py DIR — seeds for fuzz_onnx (run_fuzz_onnx.sh): valid models
that torch.onnx and onnx.helper write, and truncated and garbled copies."""
import os, random, sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

d = sys.argv[1]
os.makedirs(d, exist_ok=True)
valid = {}

def save(name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

# --- onnx.helper models: small, with the attributes the importer reads
def model(name, nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    valid[name] = m.SerializeToString()

f32 = TensorProto.FLOAT
rng = np.random.default_rng(0)
w = lambda n, *s: numpy_helper.from_array(rng.standard_normal(s).astype(np.float32), n)
i64 = lambda n, v: numpy_helper.from_array(np.array(v, np.int64), n)
X = lambda *s: helper.make_tensor_value_info("x", f32, list(s))
Y = helper.make_tensor_value_info("y", f32, None)
model("gemm", [helper.make_node("Gemm", ["x", "fc.weight", "fc.bias"], ["y"], transB=1)],
      [X(2, 4)], [Y], [w("fc.weight", 3, 4), w("fc.bias", 3)])
model("gemm_general", [helper.make_node("Gemm", ["x", "b", "c"], ["y"], alpha=0.5, beta=2.0, transA=1)],
      [X(4, 2)], [Y], [w("b", 4, 3), w("c", 1, 3)])
model("conv_pool", [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[1, 1], group=1),
                    helper.make_node("Relu", ["c"], ["r"]),
                    helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
                    helper.make_node("AveragePool", ["p"], ["a"], kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                                     count_include_pad=1),
                    helper.make_node("GlobalAveragePool", ["a"], ["y"])],
      [X(1, 3, 8, 8)], [Y], [w("w", 4, 3, 3, 3), w("b", 4)])
model("conv_same", [helper.make_node("Conv", ["x", "w"], ["y"], auto_pad="SAME_UPPER", kernel_shape=[3, 3])],
      [X(1, 2, 5, 5)], [Y], [w("w", 2, 2, 3, 3)])
model("pool_ceil", [helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1)],
      [X(1, 1, 7, 7)], [Y])
model("shape_chain", [helper.make_node("Shape", ["x"], ["s"]),
                      helper.make_node("Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.INT64, [], [0])),
                      helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
                      helper.make_node("Unsqueeze", ["n", "ax"], ["n1"]),
                      helper.make_node("Concat", ["n1", "m1"], ["shp"], axis=0),
                      helper.make_node("Reshape", ["x", "shp"], ["y"])],
      [X(2, 3, 4)], [Y], [i64("ax", [0]), i64("m1", [-1])])
model("misc", [helper.make_node("Clip", ["x", "lo", "hi"], ["c"]),
               helper.make_node("HardSigmoid", ["c"], ["h"], alpha=0.3),
               helper.make_node("Transpose", ["h"], ["t"], perm=[1, 0]),
               helper.make_node("Softmax", ["t"], ["s"], axis=-1),
               helper.make_node("Squeeze", ["s"], ["q"]),
               helper.make_node("Flatten", ["q"], ["f"], axis=0),
               helper.make_node("Dropout", ["f"], ["y"])],
      [X(3, 5)], [Y], [numpy_helper.from_array(np.array(-1, np.float32), "lo"),
                       numpy_helper.from_array(np.array(2, np.float32), "hi")])
model("dynamic", [helper.make_node("MatMul", ["x", "m"], ["y"])],
      [helper.make_tensor_value_info("x", f32, ["batch", 4])], [Y], [w("m", 4, 2)])
model("hsig_opset6", [helper.make_node("HardSigmoid", ["x"], ["y"])], [X(2, 3)], [Y], opset=6)

# --- torch.onnx exports: a conv net with batchnorm kept, and a view chain
try:
    import io
    import torch
    import torch.nn as nn

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.bn = nn.BatchNorm2d(4)
            self.pool = nn.AvgPool2d(2)
            self.fc = nn.Linear(4 * 4 * 4, 5)

        def forward(self, x):
            x = self.pool(torch.nn.functional.hardswish(self.bn(self.conv(x))))
            return torch.log_softmax(self.fc(x.view(x.size(0), -1)), 1)

    torch.manual_seed(0)
    for name, mode, dyn in (("torch_net", torch.onnx.TrainingMode.PRESERVE, None),
                            ("torch_net_eval", torch.onnx.TrainingMode.EVAL, {"x": {0: "batch"}})):
        b = io.BytesIO()
        torch.onnx.export(Net().eval(), torch.randn(2, 3, 8, 8), b, opset_version=13, training=mode,
                          do_constant_folding=False, input_names=["x"], output_names=["y"], dynamic_axes=dyn)
        valid[name] = b.getvalue()
except ImportError:
    pass

# --- the valid ones, and damaged copies
r = random.Random(1)
for name, data in valid.items():
    save(name + ".onnx", data)
    save(name + ".trunc.onnx", data[: len(data) // 2])
    save(name + ".trunc1.onnx", data[:-1])
    g = bytearray(data)
    for _ in range(max(1, len(g) // 200)):
        g[r.randrange(len(g))] = r.randrange(256)
    save(name + ".garbled.onnx", bytes(g))
save("empty.onnx", b"")
save("text.onnx", b"net x { }\n")
print(f"{len(os.listdir(d))} seeds in {d}")
