"""What serving PyTorch's default layout and its biases costs, estimated per layer of a workload.

The kernels read and write packed channels-last tensors. ``ckspace_strided_run`` gathers an NCHW
input and weight into the workspace, runs the kernel, and scatters the result back, adding the
bias on the way; on channels-last tensors a bias is one more pass over the output, in place. Each
of those passes is a memory-bound copy: it reads and writes each element once. This script puts
the bytes those passes move, at the GPU's HBM bandwidth (``ckspace/data/hardware.json``), beside
the convolution's own time at the TFLOPS ``ckspace select`` predicts for its pick among the
shipped model's 30 measured kernels (gfx950 forward bf16: the one cell with a trained model), and
compares the three ways a bias could be served:

* a separate pass (what ckspace does): 2 x output bytes on channels-last tensors, 0 extra on NCHW
  ones (the scatter that converts the output adds the bias in the same pass);
* CK Tile's D-tensor epilogue (``grouped_convolution_forward_bias_clamp``): its D tensor has the
  output's layout, so a per-channel bias would first be broadcast to a full output-sized tensor
  (2 x output bytes written and read again) -- no cheaper, and another kernel instantiation per
  kernel to build;
* a fused epilogue of ckspace's own: 0 extra bytes, but every kernel built twice (with and without).

Every figure is an estimate (no GPU ran it): the passes at the full bandwidth, the convolutions at
the predicted TFLOPS.

    python3 bench/layout_overhead.py [--workload torchvision-resnet50 torchvision-vgg16]
"""

from __future__ import annotations

import argparse

import numpy as np

from ckspace.census.survey import read_layers
from ckspace.core.errors import NoKernelError
from ckspace.features.hardware import hardware_facts
from ckspace.select.selector import Selector
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.workloads.datasets import DATASETS

ARCH, VARIANT, DTYPE, BYTES = "gfx950", "forward", "bf16", 2


def layers(name: str) -> list[tuple[str, object, bool]]:
    """(layer, problem, bias) of a shipped workload, in the model's order (as the census reads it)."""
    return [(named.name, named.layer.problem, named.layer.bias) for named in read_layers(DATASETS[name].path)]


def elements(problem) -> tuple[int, int, int]:
    """Input, weight and output elements of a problem."""
    return (
        problem.N * problem.C * problem.input_volume,
        problem.K * problem.Cg * problem.filter_volume,
        (problem.N * problem.K * problem.output_volume),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workload", nargs="+", default=["torchvision-resnet50", "torchvision-vgg16"])
    args = parser.parse_args()
    selector = Selector.load(ARCH, VARIANT, DTYPE)
    candidates = [config_from_any_name(n, ARCH) for n in selector.default_candidates]
    bandwidth = hardware_facts(ARCH).memory_bandwidth_gbs * 1e9
    print(f"{ARCH} {VARIANT} {DTYPE}: HBM {bandwidth / 1e12:.1f} TB/s; estimates, not measurements")
    for workload in args.workload:
        conv, nchw, bias_pass, total_nchw = [], [], [], []
        served = 0
        for _, problem, bias in layers(workload):
            try:
                pick = selector.select(problem, candidates, k=1).top[0]
            except NoKernelError:
                continue
            served += 1
            seconds = problem.flops / (pick.predicted_tflops * 1e12)
            x, w, y = elements(problem)
            conversion = 2 * (x + w + y) * BYTES / bandwidth  # gather input and weight, scatter the output
            conv.append(seconds)
            nchw.append(conversion / seconds)
            bias_pass.append((2 * y * BYTES / bandwidth) / seconds if bias else 0.0)
            total_nchw.append(conversion)
        conv_total = sum(conv)
        print(f"\n{workload}: {served} layers a measured kernel runs")
        print(f"  convolutions, predicted:                 {conv_total * 1e3:8.3f} ms")
        print(
            f"  NCHW conversions (in, weight, out):      {sum(total_nchw) * 1e3:8.3f} ms "
            f"(+{sum(total_nchw) / conv_total:.0%} of the convolutions; per layer median "
            f"{np.median(nchw):.0%}, P90 {np.percentile(nchw, 90):.0%})"
        )
        biased = [b for b in bias_pass if b > 0]
        if biased:
            extra = sum(b * c for b, c in zip(bias_pass, conv, strict=True))
            print(
                f"  bias, channels-last, separate pass:      {extra * 1e3:8.3f} ms "
                f"(+{extra / conv_total:.0%}; per biased layer median {np.median(biased):.0%}); "
                "NCHW: 0 extra (folded into the output's scatter)"
            )
            print(
                "  bias, CK's D tensor (broadcast to output size first): the same bytes again, plus a build per kernel"
            )


if __name__ == "__main__":
    main()
