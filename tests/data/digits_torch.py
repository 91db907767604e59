#!/usr/bin/python3
"""digits_torch.py DATADIR [EPOCHS] — examples/digits.net in PyTorch: the same
layers, Adam(lr=0.005)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10), batch 32, drop_last, shuffled each epoch; prints the
test accuracy after each epoch and, last, a line `final test accuracy A%`.
The reference figures for `ncc train examples/digits.net` (make_digits.py
writes DATADIR)."""
import os
import sys

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Digits(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(128, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 2)
        h = F.max_pool2d(F.relu(self.conv2(h)), 2)
        return self.fc2(F.relu(self.fc1(h.flatten(1))))


def main():
    d = sys.argv[1]
    epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    torch.manual_seed(seed)
    ld = lambda f: torch.from_numpy(np.load(os.path.join(d, f)))
    x, y, tx, ty = ld("x.npy"), ld("y.npy").long(), ld("test_x.npy"), ld("test_y.npy").long()
    m = Digits()
    opt = torch.optim.Adam(m.parameters(), lr=0.005)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=32, shuffle=True,
                                         drop_last=True)
    acc = 0.0
    for e in range(epochs):
        m.train()
        tot = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            loss = F.cross_entropy(m(xb), yb)
            loss.backward()
            opt.step()
            tot += loss.item()
        sched.step()
        m.eval()
        with torch.no_grad():
            lg = m(tx)
            tl = F.cross_entropy(lg, ty).item()
            acc = (lg.argmax(1) == ty).float().mean().item() * 100
        print("epoch %d: train loss %.4f, test loss %.4f, test accuracy %.2f%%" % (e + 1, tot / len(loader), tl, acc))
    print("final test accuracy %.2f%%" % acc)


if __name__ == "__main__":
    main()
