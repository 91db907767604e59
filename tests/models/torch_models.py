"""torch_models.py — torchvision's classification models rebuilt in plain
torch.nn, for checking ncc's examples against them without torchvision
(which Debian's python3-torch does not ship).

Each builder follows torchvision's module structure attribute by attribute,
so state_dict() keys and shapes are torchvision's; the parameter counts are
checked against torchvision's published figures below, which guards the
rebuild itself.

Usage:
  torch_models.py MODEL                  print "name dtype[shape]" per state_dict
                                         entry (no num_batches_tracked), like
                                         `ncc --emit=params`
  torch_models.py --check-counts         assert every rebuilt model has
                                         torchvision's published parameter count
  torch_models.py --compare MODEL FILE   compare FILE (ncc --emit=params output)
                                         with MODEL's state_dict: names, shapes
"""
import sys

import torch.nn as nn

# Layers are built on the meta device: only names and shapes are needed, and
# VGG's 138 M parameters would otherwise be allocated and initialised.
DEV = {"device": "meta"}

# torchvision's published figures (docs: "Classification" model table, "Params")
PUBLISHED = {
    "vgg11": 132863336, "vgg16": 138357544, "vgg19": 143667240,
    "resnet18": 11689512, "resnet50": 25557032, "mobilenet_v2": 3504872,
    "lenet": 21840, "mlp": 235146,
}

VGG_CFGS = {
    "vgg11": [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
    "vgg16": [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"],
    "vgg19": [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
              512, 512, 512, 512, "M"],
}


class VGG(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        layers, c = [], 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(c, v, 3, padding=1, **DEV), nn.ReLU(inplace=True)]
                c = v
        self.features = nn.Sequential(*layers)
        self.avgpool = nn.AdaptiveAvgPool2d((7, 7))
        self.classifier = nn.Sequential(
            nn.Linear(512 * 7 * 7, 4096, **DEV), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, 4096, **DEV), nn.ReLU(True), nn.Dropout(0.5),
            nn.Linear(4096, 1000, **DEV))


class BasicBlock(nn.Module):
    expansion = 1

    def __init__(self, inp, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 3, stride, 1, bias=False, **DEV)
        self.bn1 = nn.BatchNorm2d(planes, **DEV)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False, **DEV)
        self.bn2 = nn.BatchNorm2d(planes, **DEV)
        self.downsample = downsample


class Bottleneck(nn.Module):
    expansion = 4

    def __init__(self, inp, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = nn.Conv2d(inp, planes, 1, bias=False, **DEV)
        self.bn1 = nn.BatchNorm2d(planes, **DEV)
        self.conv2 = nn.Conv2d(planes, planes, 3, stride, 1, bias=False, **DEV)
        self.bn2 = nn.BatchNorm2d(planes, **DEV)
        self.conv3 = nn.Conv2d(planes, planes * 4, 1, bias=False, **DEV)
        self.bn3 = nn.BatchNorm2d(planes * 4, **DEV)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = downsample


class ResNet(nn.Module):
    def __init__(self, block, layers):
        super().__init__()
        self.inplanes = 64
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False, **DEV)
        self.bn1 = nn.BatchNorm2d(64, **DEV)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        for i, (planes, n) in enumerate(zip([64, 128, 256, 512], layers)):
            setattr(self, "layer%d" % (i + 1), self._make_layer(block, planes, n, 1 if i == 0 else 2))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(512 * block.expansion, 1000, **DEV)

    def _make_layer(self, block, planes, n, stride):
        down = None
        if stride != 1 or self.inplanes != planes * block.expansion:
            down = nn.Sequential(nn.Conv2d(self.inplanes, planes * block.expansion, 1, stride, bias=False, **DEV),
                                 nn.BatchNorm2d(planes * block.expansion, **DEV))
        layers = [block(self.inplanes, planes, stride, down)]
        self.inplanes = planes * block.expansion
        layers += [block(self.inplanes, planes) for _ in range(1, n)]
        return nn.Sequential(*layers)


def conv_bn_act(inp, oup, k=3, stride=1, groups=1):
    """torchvision's Conv2dNormActivation with ReLU6: [conv, bn, relu6]."""
    return nn.Sequential(nn.Conv2d(inp, oup, k, stride, (k - 1) // 2, groups=groups, bias=False, **DEV),
                         nn.BatchNorm2d(oup, **DEV), nn.ReLU6(inplace=True))


class InvertedResidual(nn.Module):
    def __init__(self, inp, oup, stride, t):
        super().__init__()
        hidden = int(round(inp * t))
        layers = []
        if t != 1:
            layers.append(conv_bn_act(inp, hidden, k=1))
        layers += [conv_bn_act(hidden, hidden, stride=stride, groups=hidden),
                   nn.Conv2d(hidden, oup, 1, 1, 0, bias=False, **DEV), nn.BatchNorm2d(oup, **DEV)]
        self.conv = nn.Sequential(*layers)


class MobileNetV2(nn.Module):
    def __init__(self):
        super().__init__()
        setting = [[1, 16, 1, 1], [6, 24, 2, 2], [6, 32, 3, 2], [6, 64, 4, 2],
                   [6, 96, 3, 1], [6, 160, 3, 2], [6, 320, 1, 1]]
        features, c = [conv_bn_act(3, 32, stride=2)], 32
        for t, oc, n, s in setting:
            for i in range(n):
                features.append(InvertedResidual(c, oc, s if i == 0 else 1, t))
                c = oc
        features.append(conv_bn_act(c, 1280, k=1))
        self.features = nn.Sequential(*features)
        self.classifier = nn.Sequential(nn.Dropout(0.2), nn.Linear(1280, 1000, **DEV))


class LeNet(nn.Module):
    """The CNN of the PyTorch MNIST example (docs/language.md's first example)."""
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 10, 5, **DEV)
        self.conv2 = nn.Conv2d(10, 20, 5, **DEV)
        self.fc1 = nn.Linear(320, 50, **DEV)
        self.fc2 = nn.Linear(50, 10, **DEV)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256, **DEV)
        self.fc2 = nn.Linear(256, 128, **DEV)
        self.fc3 = nn.Linear(128, 10, **DEV)


def build(name):
    if name in VGG_CFGS:
        return VGG(VGG_CFGS[name])
    return {
        "resnet18": lambda: ResNet(BasicBlock, [2, 2, 2, 2]),
        "resnet50": lambda: ResNet(Bottleneck, [3, 4, 6, 3]),
        "mobilenet_v2": MobileNetV2,
        "lenet": LeNet,
        "mlp": MLP,
    }[name]()


def entries(name):
    """{state_dict key: shape} without num_batches_tracked (ncc ignores it on load)."""
    return {k: list(v.shape) for k, v in build(name).state_dict().items()
            if not k.endswith("num_batches_tracked")}


def parse_params(path):
    """ncc --emit=params output: 'name f32[d0, d1, ...]' per line."""
    out = {}
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, ty = line.partition(" ")
            dims = ty[ty.index("[") + 1:ty.rindex("]")]
            out[name] = [int(d) for d in dims.split(",")] if dims.strip() else []
    return out


def main(argv):
    if len(argv) == 2 and argv[1] == "--check-counts":
        bad = 0
        for name, want in PUBLISHED.items():
            got = sum(p.numel() for p in build(name).parameters())
            print("%-13s %12d %s" % (name, got, "ok" if got == want else "MISMATCH, published %d" % want))
            bad += got != want
        return 1 if bad else 0
    if len(argv) == 4 and argv[1] == "--compare":
        want, got = entries(argv[2]), parse_params(argv[3])
        missing = sorted(set(want) - set(got))
        extra = sorted(set(got) - set(want))
        shape = sorted(k for k in set(want) & set(got) if want[k] != got[k])
        for k in missing[:20]:
            print("missing in ncc: %s %s" % (k, want[k]))
        for k in extra[:20]:
            print("not in torchvision: %s %s" % (k, got[k]))
        for k in shape[:20]:
            print("shape differs: %s torchvision %s ncc %s" % (k, want[k], got[k]))
        ok = not (missing or extra or shape)
        print("%s: %d entries, %s" % (argv[2], len(want), "names and shapes equal" if ok else
              "%d missing, %d extra, %d shapes differ" % (len(missing), len(extra), len(shape))))
        return 0 if ok else 1
    if len(argv) == 2:
        for k, v in entries(argv[1]).items():
            print("%s f32[%s]" % (k, ", ".join(str(d) for d in v)))
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
