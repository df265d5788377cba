"""Benchmark: listing every cell of an arch, cold and warm, against a nested-loop baseline.

For each arch and rule set, in one run:

* ``nested``: tests/nested_loop.py, a plain loops-and-filters enumerator of the same rules (the way
  upstream's generator works), producing raw and valid names for all cells of one request;
* ``cold``: ckspace with no cache (rule-set generation, rule classification, names);
* ``warm``: ckspace answering from its on-disk cache;

each the median of ``--repeat`` runs, with the ratio cold / nested (all three list the upstream rule
space, ``ck=None``), and ``target``: the warm listing of the default target (the CK headers found,
less the known-wrong kernels). These run in this process: imports done, the JSON tables parsed,
only ckspace's memos cleared before a cold run. Then whole processes, as a user times them from a
shell: the first arch's ``full`` listed cold by ``ckspace enumerate --no-cache --count`` (imports
included: its cold path loads numpy and pydantic, the nested loop only the standard library)
against ``python tests/nested_loop.py``, and ``ckspace enumerate --arch gfx950 --variant
bwd_weight --count`` with a warm cache, for the default target and with ``--rules-only``. Last, what
the target costs over the rule space: ``ckspace enumerate --arch gfx950 --variant all --rule-set full
--no-cache --count`` for the target and with ``--rules-only``, as whole processes run in alternation
(``--paired`` pairs), each pair's ratio target / rules-only, and the median and range of both and of
the ratios, in wall time and in CPU time (user + system of the child: what a loaded machine disturbs
least), with the machine's load average; ``--against PATH`` runs the same pairs of another source
tree (a checkout's root, put first on PYTHONPATH) in the same alternation, for a before/after figure.

Usage: python bench/enumerate.py [--arch A ...] [--rule-set R ...] [--repeat N] [--paired N]
[--against PATH] [--paired-only]
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_nested_loop():
    spec = importlib.util.spec_from_file_location("nested_loop", HERE.parent / "tests" / "nested_loop.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["nested_loop"] = module
    spec.loader.exec_module(module)
    return module


NESTED_REVISION = "7cd53015"
"""The rules revision tests/nested_loop.py states: both sides enumerate the same rules."""


def _median_seconds(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _forget_memos() -> None:
    """Clear ckspace's in-process memos derived from the tables (pairs, gates, rules, ...), so each
    'cold' run recomputes them; the parsed JSON tables stay loaded, as the baseline's do."""
    for name, module in list(sys.modules.items()):
        if name.startswith("ckspace") and name != "ckspace.core.tables":
            for value in vars(module).values():
                if callable(getattr(value, "cache_clear", None)):
                    value.cache_clear()


def _cold(fn):
    def run():
        _forget_memos()
        return fn()

    return run


def _compare(nested, arch: str, rule_set: str, repeat: int) -> None:
    """One table row: the nested loop, ckspace cold, warm and for the default target on one arch and rule set."""
    from ckspace.core.cells import Request  # imported once main has set CKSPACE_CACHE_DIR
    from ckspace.space.space import Space

    request = Request.build(arch, rule_set, rules_revision=NESTED_REVISION)
    variants = [v.value for v in request.variants]
    dtypes = [d.value for d in request.dtypes]

    def run_nested():
        return nested.enumerate_request(arch, rule_set, variants, list(request.ndims), dtypes)

    def run_ours(use_cache: bool, ck: object = None):
        space = Space(arch, rule_set=rule_set, use_cache=use_cache, rules_revision=NESTED_REVISION, ck=ck)
        return [(k.name, k.valid) for k in space.kernels(raw=True)]

    expected = run_nested()
    ours = run_ours(False)
    want = sum(len(raw) for raw, _ in expected.values())
    if len(ours) != want:
        raise SystemExit(f"{arch} {rule_set}: ckspace lists {len(ours)} proposals, nested {want}")
    t_nested = _median_seconds(run_nested, repeat)
    t_cold = _median_seconds(_cold(lambda: run_ours(False)), repeat)
    run_ours(True)
    t_warm = _median_seconds(lambda: run_ours(True), repeat)
    run_ours(True, "auto")
    t_target = _median_seconds(lambda: run_ours(True, "auto"), repeat)
    print(
        f"{arch:8} {rule_set:11} {len(ours):8d} {t_nested:9.4f} {t_cold:8.4f} {t_cold / t_nested:11.2f} "
        f"{t_warm:8.4f} {t_warm / t_nested:11.2f} {t_target:8.4f}"
    )


TARGET_LISTING = ["enumerate", "--arch", "gfx950", "--variant", "all", "--rule-set", "full", "--no-cache", "--count"]
"""The cold listing whose target / rules-only ratio the paired figure measures."""


def _spread(values: list[float], unit: str = " s") -> str:
    return f"{statistics.median(values):.3f}{unit} ({min(values):.3f}..{max(values):.3f})"


def _paired_target(pairs: int, against: Path | None) -> None:
    """The target's cold listing beside the rules-only one, whole processes in alternation (the order
    inside a pair alternates too, so neither side always runs first on a loaded machine)."""
    trees = {"this tree": None} if against is None else {"this tree": None, str(against): against}
    times: dict[tuple[str, str], list[float]] = {(t, side): [] for t in trees for side in ("target", "rules-only")}
    cpu: dict[tuple[str, str], list[float]] = {key: [] for key in times}
    loads = []
    for i in range(pairs):
        for tree, root in trees.items():
            env = dict(os.environ)
            if root is not None:
                env["PYTHONPATH"] = os.pathsep.join([str(root), env.get("PYTHONPATH", "")])
            sides = [("target", []), ("rules-only", ["--rules-only"])]
            for side, extra in sides if i % 2 == 0 else sides[::-1]:
                cmd = [sys.executable, "-m", "ckspace", *TARGET_LISTING, *extra]
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                start = time.perf_counter()
                subprocess.run(cmd, check=True, capture_output=True, env=env, cwd=root or HERE.parent)  # -m: cwd first
                times[tree, side].append(time.perf_counter() - start)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[tree, side].append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
        loads.append(os.getloadavg()[0])
    print(f"\ntarget vs rules-only, cold `ckspace {' '.join(TARGET_LISTING)}` (whole processes, {pairs} pairs):")
    for tree in trees:
        for clock, measured in (("wall", times), ("CPU", cpu)):
            target, rules = measured[tree, "target"], measured[tree, "rules-only"]
            ratios = [a / b for a, b in zip(target, rules, strict=True)]
            print(
                f"  {tree}, {clock}: target {_spread(target)}, rules-only {_spread(rules)}, paired ratio "
                f"{_spread(ratios, '')} (goal <= 1.10)"
            )
    print(f"  load average (1 min) during the pairs: {min(loads):.1f}..{max(loads):.1f} on {os.cpu_count()} CPUs")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", nargs="+", default=["gfx942", "gfx950", "gfx90a", "gfx1250"])
    parser.add_argument("--rule-set", nargs="+", default=["default", "full", "full-tests", "tiny"])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--paired", type=int, default=7, help="pairs of the target / rules-only figure")
    parser.add_argument("--against", type=Path, help="another source tree to pair with this one (before/after)")
    parser.add_argument("--paired-only", action="store_true", help="only the target / rules-only figure")
    args = parser.parse_args()
    if args.paired_only:
        _paired_target(args.paired, args.against)
        return 0

    tmp = tempfile.mkdtemp(prefix="ckspace-bench-")
    atexit.register(shutil.rmtree, tmp, ignore_errors=True)
    os.environ["CKSPACE_CACHE_DIR"] = tmp
    nested = _load_nested_loop()
    nested.load_tables()  # both sides start with their tables parsed (ckspace re-reads only the
    # memos derived from them: the JSON tables themselves stay loaded, as nested's do)

    print(
        f"{'arch':8} {'rule set':11} {'kernels':>8} {'nested s':>9} {'cold s':>8} {'cold/nested':>11} "
        f"{'warm s':>8} {'warm/nested':>11} {'target s':>8}"
    )
    for arch in args.arch:
        for rule_set in args.rule_set:
            _compare(nested, arch, rule_set, args.repeat)

    t_python = _median_seconds(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True), args.repeat)
    print()
    arch = args.arch[0]
    ours = [
        sys.executable,
        "-m",
        "ckspace",
        "enumerate",
        "--arch",
        arch,
        "--variant",
        "all",
        "--rule-set",
        "full",
        "--rules-only",
        "--rules-revision",
        NESTED_REVISION,
        "--no-cache",
        "--count",
    ]
    theirs = [sys.executable, str(HERE.parent / "tests" / "nested_loop.py"), "--arch", arch, "--rule-set", "full"]
    t_ours, t_theirs = (
        _median_seconds(lambda c=c: subprocess.run(c, check=True, capture_output=True), args.repeat)
        for c in (ours, theirs)
    )
    print(
        f"cold {arch} full, whole process: ckspace enumerate --no-cache --count {t_ours:.3f} s, "
        f"tests/nested_loop.py {t_theirs:.3f} s, ratio {t_ours / t_theirs:.2f} (median of {args.repeat})"
    )
    for extra in ([], ["--rules-only"]):
        cmd = [
            sys.executable,
            "-m",
            "ckspace",
            "enumerate",
            "--arch",
            "gfx950",
            "--variant",
            "bwd_weight",
            "--count",
            *extra,
        ]
        subprocess.run(cmd, check=True, capture_output=True)
        t_proc = _median_seconds(lambda cmd=cmd: subprocess.run(cmd, check=True, capture_output=True), args.repeat)
        print(
            f"warm `ckspace enumerate --arch gfx950 --variant bwd_weight --count{' ' if extra else ''}"
            f"{' '.join(extra)}` (whole process): {t_proc:.3f} s median of {args.repeat} (goal < 0.3 s; bare "
            f"interpreter start: {t_python:.3f} s)"
        )
    _paired_target(args.paired, args.against)
    return 0


if __name__ == "__main__":
    sys.exit(main())
