"""Mutation testing of the contract modules (tox -e mutation): mutmut over a copy of the project.

The contracts: the decision and the blocking (gpucheck/blocking.py), the exit status of a run
(gpucheck/session.py: ``exit_status``), the cluster configuration reading (gpucheck/cluster/config.py),
``gpucheck compare``'s verdicts and exit status (gpucheck/compare/verdicts.py and the statistics they rest on,
gpucheck/compare/stats.py: the functions in ``ONLY_FUNCTIONS``, not its reading of files, machine section or
output).
Only in-process tests are selected: a mutant lives in the pytest process (mutmut's trampoline), not in the
probe children a full ``pytest --gpucheck`` run starts.

The project is copied to a temporary folder with a ``[mutmut]`` section of its own (setup.cfg), so the
work tree gets no ``mutants/`` folder and no configuration file. Prints mutmut's results and the survival
rate per module; exits 0 (survivors are for the closing note: each gets a test or a reason).
Usage: python tests/mutation/run_mutmut.py [--keep] [--root PATH] [--modules PATH,PATH]
(``--root``: another tree of the project, e.g. an older commit's from ``git archive``, for a before/after
comparison; a selected test file it lacks is left out.)
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODULES = (
    "gpucheck/blocking.py", "gpucheck/session.py", "gpucheck/cluster/config.py", "gpucheck/compare/verdicts.py",
    "gpucheck/compare/stats.py",
)
#: Only these functions' mutants are run and counted. The rest of session.py is the pytest session's plumbing;
#: the rest of gpucheck/compare/ reads files and writes the report (text, Markdown, JSON, plot), not the verdicts.
ONLY_FUNCTIONS = {
    "gpucheck/session.py": ("exit_status",),
    # the verdict of each benchmark and figure (``Comparison.exit_status`` and ``regressions`` are properties,
    # which mutmut does not mutate: tests/test_compare_contracts.py checks them all the same)
    "gpucheck/compare/verdicts.py": ("compare_runs", "_row", "_figures", "_relative_iqr"),
    # the statistics they rest on (the whole module)
    "gpucheck/compare/stats.py": (
        "welch_p", "student_t_p", "_betainc", "mann_whitney_p", "_thin",
        "hodges_lehmann", "_ranked_differences", "_middle_pair", "_ranked_differences_within", "_listed",
    ),
}
TESTS = (
    "tests/test_blocking_contracts.py",
    "tests/test_cluster_config_contracts.py",
    "tests/test_contracts.py",
    "tests/test_cluster_config.py",
    "tests/test_visibility_and_host.py::test_independent_of_root_cause",
    "tests/test_plugin.py::test_exit_status_of_a_run",
    # gpucheck/compare/: the in-process tests (the others run the ``gpucheck compare`` command in a child)
    "tests/test_compare.py::test_hodges_lehmann_is_the_median_of_every_difference",
    "tests/test_compare.py::test_student_t_matches_the_tables",
    "tests/test_compare.py::test_mann_whitney_matches_scipy",
    "tests/test_compare_shift.py",
    "tests/test_compare_contracts.py",
)


def mutant_patterns(modules: tuple[str, ...]) -> list[str]:
    """``mutmut run``'s mutant names (fnmatch patterns): every mutant of a module, or of its listed functions.
    ``x_NAME*`` is the function's mangled name (mutmut picks the clean run's tests by it) and its mutants'
    (``x_NAME__mutmut_N``); a listed name that is the prefix of another's takes that one in too."""
    patterns = []
    for path in modules:
        dotted = path.removesuffix(".py").replace("/", ".")
        wanted = ONLY_FUNCTIONS.get(path)
        patterns += [f"{dotted}.*"] if wanted is None else [f"{dotted}.x_{w}*" for w in wanted]
    return patterns


def setup_cfg(root: Path, modules: tuple[str, ...]) -> str:
    tests = [t for t in TESTS if (root / t.split("::")[0]).exists()]
    lines = ["[mutmut]", "source_paths = gpucheck", "only_mutate ="]
    lines += [f"    {m}" for m in modules]
    lines += ["pytest_add_cli_args_test_selection ="] + [f"    {t}" for t in tests]
    lines += ["also_copy =", "    conftest.py", "    README.md"]
    lines += ["pytest_add_cli_args =", "    -p", "    no:cacheprovider", "    -p", "    no:xdist"]
    return "\n".join(lines) + "\n"


def main() -> int:
    keep = "--keep" in sys.argv
    root = Path(sys.argv[sys.argv.index("--root") + 1]).resolve() if "--root" in sys.argv else ROOT
    # A run over the first three takes about 25 minutes on two cores (cluster/config.py alone has ~1,150 mutants);
    # compare.py's 1,078 (its listed functions, now in compare/verdicts.py and compare/stats.py) took 6 to 7 minutes more.
    modules = tuple(sys.argv[sys.argv.index("--modules") + 1].split(",")) if "--modules" in sys.argv else MODULES
    work = Path(tempfile.mkdtemp(prefix="gpucheck-mutation-"))
    try:
        for name in ("gpucheck", "tests"):
            shutil.copytree(root / name, work / name, ignore=shutil.ignore_patterns("__pycache__", "mutants"))
        for name in ("conftest.py", "pyproject.toml", "README.md"):
            shutil.copy2(root / name, work / name)
        (work / "setup.cfg").write_text(setup_cfg(root, modules))
        mutmut = [sys.executable, "-m", "mutmut"]
        # TensorFlow's own reading of the cluster cases, computed once for the run (tests/test_cluster_config.py).
        oracle = work / "tf-oracle"
        oracle.mkdir()
        env = {**os.environ, "GPUCHECK_TF_ORACLE_CACHE": str(oracle)}
        subprocess.run([*mutmut, "run", *mutant_patterns(modules)], cwd=work, check=False, env=env)
        done = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, capture_output=True, text=True, check=False)
        print(done.stdout)
        if done.returncode:
            print(done.stderr, file=sys.stderr)
        totals: Counter[tuple[str, str]] = Counter()
        for line in done.stdout.splitlines():
            m = re.match(r"\s*(gpucheck[\w.]+)\.x[_ǁ]?(\w+?)__mutmut_\d+: (\w[\w ]*)", line)
            if not m:
                continue
            module, function, status = m.groups()
            path = module.replace(".", "/") + ".py"
            wanted = ONLY_FUNCTIONS.get(path)
            if wanted is not None and not any(function.endswith(w) for w in wanted):
                continue
            totals[(path, "all")] += 1
            totals[(path, status.strip())] += 1
        for path in modules:
            all_ = totals[(path, "all")]
            survived = totals[(path, "survived")]
            if all_:
                print(f"{path}: {survived} of {all_} mutants survived ({100 * survived / all_:.0f}%)")
        return 0
    finally:
        if keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
