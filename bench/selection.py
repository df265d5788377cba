"""Latency of one ``Selector.select`` call with the shipped model loaded.

Registries: the model's 30 measured kernels, and every GEMM kernel of the ``full`` rule set for
gfx950 forward 2D bf16. Problems: the 300 forward shapes of the benchmark set (the
``benchmark-forward-300`` data set). Each select sees a new problem (nothing per-problem is cached); the
candidate columns are prepared once per registry, as a long-lived selector does. The generated
dispatcher's ``ckspace_select`` is timed twice: through ctypes, and from C itself by
``selection_driver.c`` (compiled here with the host C compiler; it loads the library with dlopen and
calls ``ckspace_select`` in a loop over the answered problems), the figure a host program sees.
Also reported: LightGBM's own ``Booster.predict`` on the same feature matrix, against the direct
C-API call the selector makes.

    python3 bench/selection.py [--repeats N] [--model DIR] [--c-only]

``--model DIR`` times a model directory of your own (``ckspace train`` or ``ckspace learn`` wrote it)
in place of the shipped one; ``--c-only`` times only the 30 measured kernels' ``ckspace_select`` from
C (the figure the selection target is stated in).

(Not named select.py: a script's folder comes first on the import path, and a select.py there would
shadow the standard library's select module that subprocess and asyncio import.)
"""

from __future__ import annotations

import argparse
import csv
import ctypes
import itertools
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from ckspace.core.errors import NoKernelError
from ckspace.core.vocab import Dtype, Variant
from ckspace.emit.dispatcher import HEADER, Library, dispatcher_sources, host_units
from ckspace.emit.rendering import template_environment
from ckspace.features.matrix import feature_matrix
from ckspace.run.library import ConvProblemC, KernelLibrary
from ckspace.select.compiled import compile_library, host_c_compiler
from ckspace.select.selector import Selector
from ckspace.space.benchmark_names import config_from_any_name
from ckspace.space.space import Space
from ckspace.workloads.datasets import DATASETS
from ckspace.workloads.problem import ConvProblem


def problems() -> list[ConvProblem]:
    keys = ("N", "G", "C", "K", "Hi", "Wi", "Y", "X", "stride_h", "stride_w", "pad_h", "pad_w", "dil_h", "dil_w")
    with DATASETS["benchmark-forward-300"].path.open(newline="") as handle:
        return [ConvProblem.from_values({k: int(row[k]) for k in keys}) for row in csv.DictReader(handle)]


def timed(call, inputs, repeats: int) -> np.ndarray:
    samples = []
    for item in itertools.islice(itertools.cycle(inputs), repeats):
        start = time.perf_counter()
        call(item)
        samples.append(time.perf_counter() - start)
    return np.asarray(samples) * 1e3


def report(label: str, ms: np.ndarray) -> None:
    print(
        f"{label:<48} p50 {np.percentile(ms, 50) * 1e3:8.1f} us   p99 {np.percentile(ms, 99) * 1e3:8.1f} us"
        f"   (n={ms.size})"
    )


DRIVER = Path(__file__).with_name("selection_driver.c")


def dispatcher_for(configs: list, model: Path | None = None) -> tuple[KernelLibrary, str]:
    """The generated dispatcher's host part for ``configs`` (ranked by ``model``, default the shipped
    one), compiled with the host C compiler, and its header's text."""
    library = Library.build(configs)
    models = {(Variant.FORWARD, Dtype.BF16): model} if model is not None else {}
    files = dispatcher_sources(library, "gfx950", template_environment(), models)
    sources = {path: data.decode() for path, data in files.items()}
    return KernelLibrary(compile_library(sources, host_units(list(sources)), host_c_compiler())), sources[HEADER]


def timed_from_c(library: Path, header: str, structs: list[ConvProblemC], repeats: int) -> tuple[float, float]:
    """(p50, p99) in microseconds of ``ckspace_select`` called from C by the driver."""
    with tempfile.TemporaryDirectory(prefix="ckspace-bench-") as folder:
        tmp = Path(folder)
        (tmp / HEADER).write_text(header)
        problems = tmp / "problems.bin"
        problems.write_bytes(b"".join(bytes(s) for s in structs))
        assert len(problems.read_bytes()) == len(structs) * ctypes.sizeof(ConvProblemC)
        driver = tmp / "driver"
        compiler = host_c_compiler()
        subprocess.run([compiler, "-O2", f"-I{tmp}", "-o", str(driver), str(DRIVER), "-ldl"], check=True)
        out = subprocess.run(
            [str(driver), str(library), str(problems), str(repeats)], check=True, capture_output=True, text=True
        ).stdout.split()
    return float(out[1]), float(out[3])


def _answers(selector: Selector, problem: ConvProblem, candidates: list) -> bool:
    try:
        selector.select(problem, candidates)
    except NoKernelError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3000)
    parser.add_argument("--model", type=Path, help="a model directory to time (default: the shipped model)")
    parser.add_argument("--c-only", action="store_true", help="only ckspace_select from C, 30 kernels")
    args = parser.parse_args()
    start = time.perf_counter()
    selector = Selector.load("gfx950", "forward", "bf16", model_dir=args.model)
    took = (time.perf_counter() - start) * 1e3
    print(f"load {args.model or 'the shipped model'}: {took:.1f} ms (engine: {selector.engine})")
    shapes = problems()
    shipped = Selector.load("gfx950", "forward", "bf16")
    measured = [config_from_any_name(n, "gfx950") for n in shipped.default_candidates]
    if args.c_only:
        answered = [p for p in shapes if _answers(selector, p, measured)]
        dispatcher, header = dispatcher_for(measured, args.model)
        structs = [s for p in answered if dispatcher.select_raw(s := ConvProblemC.of(p, "forward", "bf16"))[0] == 0]
        p50, p99 = timed_from_c(dispatcher.path, header, structs, args.repeats)
        print(f"30 measured kernels, ckspace_select from C: p50 {p50:.1f} us   p99 {p99:.1f} us   (n={args.repeats})")
        return
    reference = Selector.load("gfx950", "forward", "bf16", model_dir=args.model, engine="lightgbm")
    registries = {
        "30 measured kernels": measured,
        "full rule set (forward 2D bf16)": [
            c for c in Space("gfx950", "forward", 2, "bf16", "full") if c.kind == "gemm"
        ],
    }
    for label, candidates in registries.items():
        answered = []
        for p in shapes:
            try:
                selector.select(p, candidates)
                answered.append(p)
            except NoKernelError:
                pass
        print(
            f"{label}: {len(candidates)} kernels; {len(answered)} of {len(shapes)} problems answered "
            "(vector fallbacks included)"
        )
        python = timed(lambda p, candidates=candidates: selector.select(p, candidates, k=5), answered, args.repeats)
        report("  Python select, compiled engine, k=5", python)
        report(
            "  Python select, LightGBM engine, k=5",
            timed(lambda p, candidates=candidates: reference.select(p, candidates, k=5), answered, args.repeats),
        )
        dispatcher, header = dispatcher_for(candidates, args.model)
        # the dispatcher holds no vector fallback outside the registry: time the problems it answers
        structs = [s for p in answered if dispatcher.select_raw(s := ConvProblemC.of(p, "forward", "bf16"))[0] == 0]
        print(f"  the dispatcher answers {len(structs)} of them (its fallbacks are the registry's kernels only)")
        compiled = timed(dispatcher.select_raw, structs, args.repeats)
        report("  compiled ckspace_select (via ctypes)", compiled)
        p50, p99 = timed_from_c(dispatcher.path, header, structs, args.repeats)
        print(f"{'  compiled ckspace_select (from C)':<48} p50 {p50:8.1f} us   p99 {p99:8.1f} us   (n={args.repeats})")
        print(f"  ctypes' share of a call: {1 - p50 / (np.percentile(compiled, 50) * 1e3):.0%} at p50")
        print(f"  compiled vs Python select: {np.percentile(python, 50) / np.percentile(compiled, 50):.1f}x at p50")
        if len(candidates) == 30:
            prepared = reference.prepare(candidates)
            matrices = [
                feature_matrix(p, reference.variant, reference.dtype, prepared.table, reference.hw)
                for p in answered
                if reference.feasible(p, prepared).all()
            ]
            lightgbm = timed(lambda m: reference.ranker.predict(m, num_threads=1), matrices, args.repeats)
            report("  LightGBM Booster.predict, the same 30 rows", lightgbm)
            print(
                f"  compiled select vs LightGBM predict alone: "
                f"{np.percentile(lightgbm, 50) / np.percentile(compiled, 50):.1f}x at p50"
            )


if __name__ == "__main__":
    main()
