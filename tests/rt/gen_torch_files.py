#!/usr/bin/python3
"""gen_torch_files.py DIR — the independent writers for test_dev_io: PyTorch
produces f32/f16/bf16/f64 tensors, their safetensors image is assembled here
from the format's definition (the `safetensors` package is not installed), and
NumPy writes expect.npy with PyTorch's own conversion of each to float32."""
import json, struct, sys
import numpy as np
import torch

out = sys.argv[1]
g = torch.Generator().manual_seed(5)
base = (torch.randn(5, 10, generator=g, dtype=torch.float64) * 3)
tensors = {
    "a.f32": base.to(torch.float32),
    "b.f16": base.to(torch.float16),
    "c.bf16": base.to(torch.bfloat16),
    "d.f64": base,
}
names = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.float64: "F64"}
header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
for k, t in tensors.items():
    # bytes through an integer view: numpy has no bfloat16
    raw = t.contiguous().view(torch.int16 if t.element_size() == 2 else
                              torch.int32 if t.element_size() == 4 else torch.int64).numpy().tobytes()
    header[k] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
    blobs.append(raw)
    off += len(raw)
h = json.dumps(header).encode()
h += b" " * (-len(h) % 8)
with open(f"{out}/torch.safetensors", "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
expect = np.stack([t.to(torch.float32).reshape(-1).numpy() for t in tensors.values()])
np.save(f"{out}/expect.npy", expect)
# .npy versions 2.0 and 3.0 as NumPy writes them, and the other dtypes
with open(f"{out}/v2.npy", "wb") as f:
    np.lib.format.write_array(f, np.arange(6, dtype=np.int32).reshape(2, 3), version=(2, 0))
with open(f"{out}/v3.npy", "wb") as f:
    np.lib.format.write_array(f, np.arange(6, dtype=np.float16).reshape(3, 2), version=(3, 0))
np.save(f"{out}/i8.npy", np.arange(-3, 3, dtype=np.int64))
np.save(f"{out}/i1.npy", np.arange(-3, 3, dtype=np.int8))
np.save(f"{out}/f8.npy", np.linspace(-1, 1, 6))
