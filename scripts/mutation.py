"""Mutation testing of the modules where a wrong constant or operator changes ckspace's answers.

    python3 scripts/mutation.py                      # every module of tests/mutation/config.toml
    python3 scripts/mutation.py --module problem_rules --module operands
    python3 scripts/mutation.py --list               # the modules and the tests each one runs

Needs the ``mutation`` extra (``pip install ".[mutation]"``: cosmic-ray). For each module it copies
the checkout (tracked and untracked, not ignored files) to a temporary directory, so the working tree
is never left mutated and a developer can keep working while it runs; makes a cosmic-ray session
restricted to the operators of the config; checks that the module's tests pass unmutated; runs
every mutant against the module's tests only (``modules.<path>.tests``); and prints the kill rate
per module and each surviving mutant with its diff. Mutants listed in
``tests/mutation/equivalent.txt`` (same behaviour for every input, with the reason) are counted
apart. Exit status 1 when a mutant that is not listed as equivalent survives.

This is not part of the default test run: it takes minutes per module on a 2-core machine.
"""

from __future__ import annotations

import argparse
import ast
import json
import logging
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ckspace.environment.files import write_atomic

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / "tests" / "mutation" / "config.toml"
EQUIVALENT = ROOT / "tests" / "mutation" / "equivalent.txt"
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Equivalent:
    """One line of equivalent.txt: a mutant named by where it is, not by cosmic-ray's occurrence
    number, which shifts whenever the module gains or loses a mutable node."""

    module: str
    operator: str
    column: int
    line: str
    reason: str

    def key(self) -> tuple[str, str, int, str]:
        return (self.module, self.operator, self.column, self.line)


@dataclass
class Outcome:
    module: str
    seconds: float = 0.0
    killed: int = 0
    timeouts: int = 0  # of the killed: by outliving the timeout, not by a failing test
    equivalent: int = 0
    survivors: list[dict] = field(default_factory=list)
    error: str | None = None
    interrupted: bool = False  # Ctrl-C: the counts are of the mutants judged before it

    @property
    def judged(self) -> int:
        return self.killed + len(self.survivors)

    @property
    def rate(self) -> float:
        return 100.0 * self.killed / self.judged if self.judged else 100.0


def read_equivalents(path: Path = EQUIVALENT) -> dict[tuple[str, str, int, str], Equivalent]:
    """``module | operator | column | source line | reason`` per line (the reason holds no ``" | "``);
    ``#`` starts a comment."""
    out: dict[tuple[str, str, int, str], Equivalent] = {}
    if not path.exists():
        return out
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        head = raw.split(" | ", 3)  # the source line may hold " | " itself; the reason may not
        parts = [p.strip() for p in head[:3] + (head[3].rsplit(" | ", 1) if len(head) == 4 else [])]
        if len(parts) != 5 or not parts[2].isdigit() or not parts[4]:
            raise SystemExit(
                f"{path}:{number}: expected 'module | operator | column | source line | reason', got {raw!r}"
            )
        entry = Equivalent(parts[0], parts[1], int(parts[2]), parts[3], parts[4])
        out[entry.key()] = entry
    return out


def allowed_operator(name: str, config: dict) -> bool:
    """Whether the config keeps cosmic-ray operator ``name`` (binary and comparison replacements
    are kept only for the listed pairs; every other operator is kept)."""
    for kind, pairs in (
        ("ReplaceBinaryOperator", config["binary"]),
        ("ReplaceComparisonOperator", config["comparison"]),
    ):
        match = re.fullmatch(rf"core/{kind}_(\w+?)_(\w+)", name)
        if match:
            return [match.group(1), match.group(2)] in pairs
    return True


def function_lines(source: str, names: list[str]) -> set[int]:
    """The lines of the functions and methods called ``names`` (the part of a module in scope)."""
    lines: set[int] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in names:
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def copy_checkout(dest: Path, ref: str | None) -> None:
    """Copy the files git knows or would add (tracked and untracked, not ignored) to ``dest``, or
    the tree of commit ``ref`` (to measure the kill rate of an earlier state)."""
    if ref is not None:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", ref], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
        return
    listed = (
        subprocess.run(
            ["git", "-C", str(ROOT), "ls-files", "-z", "-co", "--exclude-standard"], check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, listed):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)


def cosmic_ray(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cosmic_ray.cli", *args], cwd=cwd, capture_output=True, text=True, env=env
    )


def run_module(
    module: str,
    settings: dict,
    config: dict,
    equivalents: dict,
    keep: bool,
    ref: str | None = None,
    only: set[tuple[str, str, int, str]] | None = None,
) -> Outcome:
    """Mutate one module in a copy of the checkout and judge every mutant (those keyed in ``only``
    when given)."""
    from cosmic_ray.work_db import WorkDB, use_db
    from cosmic_ray.work_item import WorkerOutcome, WorkResult

    outcome = Outcome(module)
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="ckspace-mutation-"))
    try:
        copy_checkout(work, ref)
        tests = [t for t in settings["tests"] if (work / t).is_file()]
        if tests != settings["tests"]:  # an earlier commit (--ref) without some of today's test files
            log.info("%s: not in this tree: %s", module, " ".join(sorted(set(settings["tests"]) - set(tests))))
        deselect = [arg for test in settings.get("deselect", ()) for arg in ("--deselect", test)]
        command = shlex.join([sys.executable, "-m", "pytest", *config["pytest"], *deselect, *tests])
        (work / "cosmic-ray.toml").write_text(
            "[cosmic-ray]\n"
            f"module-path = {json.dumps(module)}\n"
            f"timeout = {config['timeout']}\n"
            "excluded-modules = []\n"
            f"test-command = {json.dumps(command)}\n"
            '[cosmic-ray.distributor]\nname = "local"\n'
        )
        done = cosmic_ray("init", "cosmic-ray.toml", "session.sqlite", cwd=work)
        if done.returncode:
            outcome.error = f"cosmic-ray init failed: {done.stderr.strip().splitlines()[-1:]}"
            return outcome
        source = (work / module).read_text()
        lines = source.splitlines()
        scope = function_lines(source, settings["functions"]) if "functions" in settings else None
        skip_decorators = set(config.get("equivalent_decorators", ()))
        with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
            for item in db.pending_work_items:
                mutation = item.mutations[0]
                line = mutation.start_pos[0]
                text = lines[line - 1].strip()
                key = (module, mutation.operator_name, mutation.start_pos[1], text)
                skip = (
                    (only is not None and key not in only)
                    or not allowed_operator(mutation.operator_name, config)
                    or (scope is not None and line not in scope)
                    or (mutation.operator_name == "core/RemoveDecorator" and text.lstrip("@") in skip_decorators)
                )
                if skip:
                    db.set_result(item.job_id, WorkResult(output="out of scope", worker_outcome=WorkerOutcome.SKIPPED))
        env = dict(os.environ, CKSPACE_HYPOTHESIS_PROFILE="mutation")
        if settings.get("warm_cell_cache"):
            # the module is not part of what the cell cache stores (validity rules, expressions, rule
            # sets): the unmutated run below fills it once and every mutant reads it
            env["CKSPACE_TEST_CACHE_DIR"] = str(work / "cell-cache")
        check = subprocess.run(shlex.split(command), cwd=work, capture_output=True, text=True, env=env)
        if check.returncode:
            outcome.error = f"the module's tests fail unmutated: {check.stdout.strip().splitlines()[-1:]}"
            return outcome
        # a session of its own: Ctrl-C reaches this script alone, which then ends cosmic-ray and the
        # mutant's tests together before removing the copy, and counts what was judged before it
        runner = subprocess.Popen(
            [sys.executable, "-m", "cosmic_ray.cli", "exec", "cosmic-ray.toml", "session.sqlite"],
            cwd=work,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        try:
            _, errors = runner.communicate()
        except KeyboardInterrupt:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
            outcome.interrupted = True
        else:
            if runner.returncode:
                outcome.error = f"cosmic-ray exec failed: {errors.strip().splitlines()[-1:]}"
                return outcome
        with use_db(str(work / "session.sqlite"), WorkDB.Mode.open) as db:
            for item, result in db.completed_work_items:
                if result.worker_outcome is WorkerOutcome.SKIPPED:
                    continue
                mutation = item.mutations[0]
                line, column = mutation.start_pos
                key = (module, mutation.operator_name, column, lines[line - 1].strip())
                if result.is_killed:  # a failing test, a timeout, or a mutant that cannot even load
                    outcome.killed += 1
                    outcome.timeouts += result.output == "timeout"  # cosmic-ray's word for it
                elif key in equivalents:
                    outcome.equivalent += 1
                else:
                    outcome.survivors.append(
                        {
                            "operator": mutation.operator_name,
                            "line": line,
                            "column": column,
                            "source": key[3],
                            "occurrence": mutation.occurrence,
                            "outcome": str(result.test_outcome),
                            "diff": result.diff or "",
                        }
                    )
    finally:
        outcome.seconds = time.monotonic() - start
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return outcome


def report(outcomes: list[Outcome]) -> str:
    rows = [
        f"{'module':44} {'mutants':>7} {'killed':>6} {'timeout':>7} {'equiv':>5} {'survived':>8} {'kill rate':>9} "
        f"{'time':>7}"
    ]
    for o in outcomes:
        if o.error:
            rows.append(f"{o.module:44} error: {o.error}")
            continue
        rows.append(
            f"{o.module:44} {o.judged + o.equivalent:7} {o.killed:6} {o.timeouts:7} {o.equivalent:5} "
            f"{len(o.survivors):8} "
            f"{o.rate:8.1f}% {o.seconds:6.0f}s"
            + ("  (interrupted: the mutants judged before it)" if o.interrupted else "")
        )
    for o in outcomes:
        for s in o.survivors:
            rows.append(
                f"\nsurvived: {o.module}:{s['line']}:{s['column']} {s['operator']} "
                f"(equivalent.txt key: {o.module} | {s['operator']} | {s['column']} | {s['source']})"
            )
            rows.append(s["diff"].rstrip())
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--module",
        action="append",
        default=[],
        help="a module of the config, by path or file stem (repeatable; default: all)",
    )
    parser.add_argument("--list", action="store_true", help="print the modules and their tests, run nothing")
    parser.add_argument("--json", type=Path, help="also write the outcomes as JSON to this file")
    parser.add_argument("--ref", help="mutate the tree of this commit instead of the working tree")
    parser.add_argument(
        "--survivors",
        type=Path,
        metavar="JSON",
        help="judge only the mutants that survived in an earlier run's --json output "
        "(after writing the tests that should kill them)",
    )
    parser.add_argument("--keep", action="store_true", help="keep each module's working copy and session")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    config = tomllib.loads(CONFIG.read_text())
    modules: dict[str, dict] = config["modules"]
    stems = {Path(m).stem: m for m in modules}
    chosen = []
    for name in args.module:
        path = name if name in modules else stems.get(Path(name).stem if name.endswith(".py") else name)
        if path is None:
            print(f"error: unknown module {name!r}; choose from {', '.join(stems)}", file=sys.stderr)
            return 2
        chosen.append(path)
    chosen = chosen or list(modules)
    if args.list:
        for m in chosen:
            print(f"{m}: {' '.join(modules[m]['tests'])}")
        return 0
    try:
        import cosmic_ray  # noqa: F401
    except ImportError:
        print('error: cosmic-ray is not installed; pip install ".[mutation]"', file=sys.stderr)
        return 2
    equivalents = read_equivalents()
    only = None
    if args.survivors:
        try:
            earlier = json.loads(args.survivors.read_text())
            only = {(o["module"], s["operator"], s["column"], s["source"]) for o in earlier for s in o["survivors"]}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"error: --survivors {args.survivors}: not the --json output of this script ({exc})", file=sys.stderr)
            return 2
    outcomes = []
    for m in chosen:
        log.info("mutating %s (tests: %s)", m, " ".join(modules[m]["tests"]))
        outcomes.append(run_module(m, modules[m], config["mutation"], equivalents, args.keep, args.ref, only))
        log.info(
            "%s: %d killed, %d equivalent, %d survived in %.0f s",
            m,
            outcomes[-1].killed,
            outcomes[-1].equivalent,
            len(outcomes[-1].survivors),
            outcomes[-1].seconds,
        )
        if args.json:  # after every module, so that a long run stopped half-way keeps what it measured
            write_atomic(
                args.json, json.dumps([o.__dict__ | {"rate": o.rate} for o in outcomes], indent=1).encode(), "--json"
            )
        if outcomes[-1].interrupted:
            break
    print(report(outcomes))
    if outcomes and outcomes[-1].interrupted:
        return 130
    return 1 if any(o.survivors or o.error for o in outcomes) else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONDONTWRITEBYTECODE", "1")
    sys.exit(main())
