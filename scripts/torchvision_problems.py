"""Write the convolution layers of torchvision's ResNet-50 and VGG-16 as problems CSVs.

The shipped lists ``torchvision-resnet50`` and ``torchvision-vgg16`` (``ckspace/data/problems/``,
``PROVENANCE.md``) are this script's output: the architectures as torchvision defines them
(``torchvision/models/resnet.py``: ``resnet50`` is ``Bottleneck`` blocks [3, 4, 6, 3], the stride
on the 3x3 convolution, a 1x1 ``downsample`` where a stage changes size or width, every
convolution without bias; ``torchvision/models/vgg.py``: ``vgg16`` is configuration "D", 3x3
convolutions of padding 1 with bias), at batch 32 on 224x224 images, one row per convolution in
the model's order, named as the module's ``named_modules()`` path. Public facts of the
architectures; no torchvision code is copied or needed.

Usage: python scripts/torchvision_problems.py [OUT_DIR]   (default: ckspace/data/problems)
"""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path

BATCH, IMAGE = 32, 224
COLUMNS = ["layer", "N", "C", "K", "G", "Hi", "Wi", "Y", "X", "stride", "pad", "dil", "Ho", "Wo", "bias"]
FILES = {"resnet50": "torchvision_resnet50_problems.csv", "vgg16": "torchvision_vgg16_problems.csv"}


def _row(name: str, c: int, k: int, size: int, kernel: int, stride: int, pad: int, bias: bool) -> list:
    out = (size + 2 * pad - kernel) // stride + 1
    return [name, BATCH, c, k, 1, size, size, kernel, kernel, stride, pad, 1, out, out, int(bias)]


def resnet50() -> list[list]:
    rows = [_row("conv1", 3, 64, IMAGE, 7, 2, 3, False)]
    size, inplanes = IMAGE // 4, 64  # conv1 (stride 2) then the 3x3 max pool (stride 2)
    for stage, (planes, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for block in range(blocks):
            s = stride if block == 0 else 1
            name = f"layer{stage}.{block}"
            rows.append(_row(f"{name}.conv1", inplanes, planes, size, 1, 1, 0, False))
            rows.append(_row(f"{name}.conv2", planes, planes, size, 3, s, 1, False))
            out = (size + 2 - 3) // s + 1
            rows.append(_row(f"{name}.conv3", planes, planes * 4, out, 1, 1, 0, False))
            if block == 0:  # stride or width changes: torchvision's downsample
                rows.append(_row(f"{name}.downsample.0", inplanes, planes * 4, size, 1, s, 0, False))
            inplanes, size = planes * 4, out
    return rows


def vgg16() -> list[list]:
    config = [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]
    rows, channels, size, index = [], 3, IMAGE, 0
    for item in config:
        if item == "M":
            size //= 2
            index += 1
            continue
        rows.append(_row(f"features.{index}", channels, item, size, 3, 1, 1, True))
        channels = item
        index += 2  # the convolution and its ReLU
    return rows


def text(rows: list[list]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    return buffer.getvalue()


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else Path(__file__).parents[1] / "ckspace" / "data" / "problems"
    for model, rows in (("resnet50", resnet50()), ("vgg16", vgg16())):
        (out / FILES[model]).write_text(text(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
