#!/usr/bin/python3
"""demo.py — the PyTorch side of examples/demo.sh.

    demo.py make  DIR   # LeNet with PyTorch's default init (seed 0) -> DIR/lenet.safetensors,
                        # 64 input images -> DIR/x.npy, PyTorch's logits -> DIR/ref.npy
    demo.py check DIR   # compares DIR/logits.npy (written by `ncc run`) with DIR/ref.npy

The module below is the CNN of the PyTorch MNIST example, with the layer
names of examples/lenet.net, so its state_dict loads into ncc as it is.
"""
import json
import struct
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5)
        self.conv2 = nn.Conv2d(10, 20, 5)
        self.fc1 = nn.Linear(320, 50)
        self.fc2 = nn.Linear(50, 10)

    def forward(self, x):
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return self.fc2(x)


def save_safetensors(path, sd):
    header, blobs, off = {}, [], 0
    for k, v in sd.items():
        b = v.detach().numpy().astype("<f4").tobytes()
        header[k] = {"dtype": "F32", "shape": list(v.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def main():
    cmd, d = sys.argv[1], sys.argv[2]
    if cmd == "make":
        torch.manual_seed(0)
        m = LeNet().eval()
        x = torch.rand(64, 1, 28, 28)
        with torch.no_grad():
            ref = m(x)
        save_safetensors(d + "/lenet.safetensors", m.state_dict())
        np.save(d + "/x.npy", x.numpy())
        np.save(d + "/ref.npy", ref.numpy())
        print("PyTorch: LeNet, %d parameters, 64 images -> %s/x.npy" %
              (sum(p.numel() for p in m.parameters()), d))
    else:
        got, ref = np.load(d + "/logits.npy"), np.load(d + "/ref.npy")
        err = float(np.abs(got - ref).max())
        same = int((got.argmax(1) == ref.argmax(1)).sum())
        print("ncc vs PyTorch: max |logit difference| = %.2e over %d logits; "
              "predicted class equal for %d of %d images" % (err, got.size, same, len(got)))
        print("first 16 predicted classes (untrained weights: they mean nothing yet):", " ".join(str(int(c)) for c in got.argmax(1)[:16]))
        sys.exit(0 if err <= 1e-4 * max(1.0, float(np.abs(ref).max())) else 1)


if __name__ == "__main__":
    main()
