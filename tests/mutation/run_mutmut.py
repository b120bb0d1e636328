"""Mutation testing of the contract modules (tox -e mutation): mutmut over a copy of the project.

The contracts: the decision and the blocking (gpucheck/blocking.py), the exit status of a run
(gpucheck/session.py: ``exit_status``), the cluster configuration reading (gpucheck/cluster/config.py),
``gpucheck compare``'s verdicts and exit status (gpucheck/compare/verdicts.py and the statistics they rest on,
gpucheck/compare/stats.py: the functions in ``ONLY_FUNCTIONS``, not its reading of files, machine section or
output); issue 37's: the kernel log's parsing, rules and reading (gpucheck/records/parse.py, rules.py, probe.py), the
marker's and the shared run's choice of GPUs (gpucheck/marker.py, gpucheck/shared.py), doctor's and merge's verdicts
and exit statuses (gpucheck/doctor.py, gpucheck/merge.py), pytest-html's escaped cells (gpucheck/htmlreport.py): the
functions in ``ONLY_FUNCTIONS`` where a module is also plumbing (docs/mutation.md says which).
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
    # issue 37: the kernel log's reading, parsing and rules, the marker's and the shared run's choice of GPUs,
    # doctor's and merge's verdicts and exit statuses, the pytest-html cells' escaping
    "gpucheck/records/parse.py", "gpucheck/records/rules.py", "gpucheck/records/probe.py", "gpucheck/marker.py",
    "gpucheck/shared.py", "gpucheck/doctor.py", "gpucheck/merge.py", "gpucheck/htmlreport.py",
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
    # issue 37. parse.py is run whole. rules.py: the Xid/SXid verdicts (which finding, on which GPU, how severe, how
    # many records), not the evidence's wording (_when, _first, _record_json) nor the Fabric Manager's rules.
    "gpucheck/records/rules.py": (
        "records_rules", "_kind", "_more", "_folded", "_records", "_too_many_devices", "_sxid_findings",
        "records_unread", "_gpu_of", "_same_device", "_nvlink_down_now", "_gpu_findings", "_nvml_says_as_much",
        "_cause", "_recovery_required", "_application", "_recorded", "_sxid_finding", "not_checked",
    ),
    # the reading's promise: the newest records are kept and a cut is said (the rest runs commands and walks /proc)
    "gpucheck/records/probe.py": ("Tail.feed", "Tail.lines", "read_kmsg", "_kmsg_device", "_kmsg_file", "_read"),
    # the reading of the marker and the choice of GPUs (not the describing texts, nor the imports' probing)
    "gpucheck/marker.py": (
        "layers_for", "parse_need", "_cc", "machine_gpus", "Machine.gpus_for", "for_worker", "_fits",
        "machine_blocker", "answer", "Gpu.usable",
    ),
    # what the workers read of the controller's diagnosis, and the GPUs shared out (not the file's locking/waiting)
    "gpucheck/shared.py": (
        "document", "machine_of", "_gpu_json", "_finding", "_layer", "visible_entries", "assign_gpus",
        "worker_ordinals", "parent_environment",
    ),
    # the node's verdict: usable, diagnosed, the exit status, the Prometheus textfile, the summary's verdict line,
    # and the refusal of one file for both outputs (not the argument parsing, the signals, the writing)
    "gpucheck/doctor.py": ("is_usable", "diagnosed", "exit_status", "prometheus_text", "gpu_label", "summary",
                           "_same_file"),
    # the reading of a host's report, the grouping, the drift, the exit status (not the table's layout)
    "gpucheck/merge.py": (
        "_text", "_check_schema", "_host", "_lowest_degraded", "_cuda_api", "drift", "groups", "merge", "same_names",
        "exit_status", "json_report",
    ),
    # the cells and the summary, escaped (not the pytest-html hooks' plumbing)
    "gpucheck/htmlreport.py": ("_text", "_subject", "cause_and_remedy", "summary_html"),
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
    # issue 37: the in-process tests of the kernel log, the marker, the shared run, doctor, merge and pytest-html (their
    # other tests run a command or pytest in a child, where no mutant lives)
    *(f"tests/test_records_bound.py::{t}" for t in (
        "test_the_bound_is_at_least_what_a_finding_lists", "test_the_facts_of_16000_processes_hold_the_bound_and_count_the_rest",
        "test_a_process_that_faults_again_is_newest_by_its_last_record", "test_follow_ups_are_dropped_apart_and_say_so",
        "test_processes_of_several_codes_are_counted_once", "test_thousands_of_codes_not_in_the_catalog_are_counted_together",
        "test_a_record_naming_only_its_pid_or_only_its_name_is_a_process_of_its_own",
        "test_what_is_dropped_keeps_its_times_or_says_it_has_none", "test_follow_ups_alone_make_no_count_of_a_programs_processes",
        "test_the_newest_codes_not_in_the_catalog_are_kept_by_their_last_record",
        "test_folded_codes_count_what_was_dropped_of_them_with_its_times",
        "test_a_154_without_a_recovery_action_in_its_words_has_none")),
    *(f"tests/test_hostile_records.py::{t}" for t in (
        "test_a_record_the_parser_cannot_read_is_skipped_and_counted", "test_an_impossible_kmsg_stamp_is_no_time",
        "test_a_kmsg_record_is_its_first_line_after_the_first_semicolon_at_its_stamp",
        "test_a_records_words_are_what_follows_its_pid_and_name", "test_real_logs_read_back_record_by_record",
        "test_a_record_seen_again_keeps_its_first_and_takes_its_last", "test_the_bounds_of_a_pid_a_name_and_a_stamp",
        "test_no_kernel_log_makes_the_parser_raise", "test_the_tail_counts_what_it_drops_and_skips",
        "test_the_tail_keeps_the_newest_bytes_and_never_a_cut_line",
        "test_a_kmsg_file_says_what_it_skipped_and_reads_no_continuation_line",
        "test_the_kernels_dev_kmsg_is_read_past_overwritten_records_to_its_end",
        "test_a_dev_kmsg_that_never_ends_is_read_to_a_bound_and_said")),
    *(f"tests/test_kernel_log.py::{t}" for t in (
        "test_a_fifo_in_place_of_dev_kmsg_is_refused_not_waited_on", "test_dev_kmsg_records_of_this_machine_parse_as_kmsg",
        "test_every_log_of_the_corpus_is_in_the_index_and_parsed_here", "test_no_kmsg_in_a_host_view_is_not_checked_with_the_reason",
        "test_real_lines_read_back_from_a_fake_dev_kmsg", "test_this_machines_dev_kmsg_is_read_to_its_end_and_returns",
        "test_xid_154_keeps_the_recovery_action_it_changed_to",
        # the rules over facts built by hand
        "test_a_hardware_xid_names_its_cause_on_the_gpu_at_its_address",
        "test_a_gpu_lost_of_unknown_address_is_the_one_the_log_names", "test_what_nvml_already_says_is_not_said_twice",
        "test_xid_154_asks_for_what_the_driver_says_newest_first",
        "test_a_programs_fault_is_a_note_only_where_nothing_else_is_wrong",
        "test_codes_not_in_the_catalog_are_one_note_and_the_dropped_records_are_counted",
        "test_a_log_of_more_addresses_than_gpus_is_judged_for_64_and_counted_for_the_rest",
        "test_an_sxid_is_judged_per_switch_and_is_a_note_where_no_nvswitch_is",
        "test_a_records_probe_that_did_not_finish_is_records_unread",
        "test_a_log_read_no_further_is_records_unread_beside_what_was_read", "test_the_kernel_log_not_looked_at_says_why",
        "test_an_sxid_finding_as_the_report_shows_it", "test_a_gpus_findings_as_the_report_shows_them",
        "test_a_recovery_action_is_the_findings_and_a_code_without_description_is_shown_so",
        "test_which_gpu_and_which_finding_each_record_makes", "test_what_the_kernel_log_says_beside_nvmls_own_findings",
        "test_the_words_of_a_cause_quote_the_driver_and_count_what_was_dropped",
        "test_an_sxid_note_where_no_nvswitch_is_as_the_report_shows_it",
        "test_the_order_of_the_gpus_findings_and_what_is_counted_apart",
        "test_a_log_read_no_further_as_the_report_shows_it")),
    *(f"tests/test_nvlink5_records.py::{t}" for t in (
        "test_a_hostile_line_is_no_record", "test_each_record_read_back_with_its_subcode_fatality_and_resolution")),
    "tests/test_actions.py::test_recovery_action_as_the_driver_and_nvml_give_it",
    *(f"tests/test_promises.py::{t}" for t in (
        "test_a_long_kmsg_file_keeps_its_newest_records_and_says_it_cut",
        "test_the_kernels_dev_kmsg_keeps_its_newest_records_and_says_it_cut")),
    *(f"tests/test_hostile_marker.py::{t}" for t in (
        "test_parse_need_refuses_it_in_a_bounded_sentence", "test_each_refusal_is_one_sentence_naming_the_value",
        "test_a_marker_is_read_as_written")),
    *(f"tests/test_own_suites.py::{t}" for t in (
        "test_marker_arguments", "test_marker_judges_count_memory_and_capability", "test_a_machine_wide_blocker_leads_the_reason",
        "test_the_gpus_a_marked_test_sees_are_the_frameworks_with_the_drivers_facts",
        "test_a_worker_sees_its_own_gpus_numbered_from_0", "test_a_gpu_fits_by_memory_and_compute_capability",
        "test_the_reason_a_marked_test_does_not_run",
        "test_the_document_the_workers_read_round_trips", "test_every_part_of_the_diagnosis_a_worker_reads_is_the_controllers",
        "test_one_process_diagnoses_under_the_lock", "test_gpus_shared_out_to_workers",
        "test_each_worker_gets_its_share_of_the_gpus_and_diagnoses_the_whole_run",
        "test_the_suite_side_names_what_shared_reads")),
    *(f"tests/test_doctor.py::{t}" for t in (
        "test_doctors_exit_status_is_usable_not_usable_or_not_diagnosed",
        "test_the_prometheus_textfile_names_the_verdict_action_findings_and_root_cause",
        "test_the_textfiles_metrics_say_what_they_are",
        "test_the_summary_names_the_root_cause_and_each_other_fault", "test_one_file_for_both_outputs_is_the_same_file")),
    *(f"tests/test_merge.py::{t}" for t in (
        "test_what_merge_reads_of_a_hosts_report", "test_a_degraded_report_without_a_root_cause_names_its_lowest_degraded_finding",
        "test_a_report_merge_cannot_read_is_one_sentence", "test_merge_counts_each_report_once_and_names_what_it_left_out",
        "test_the_fleet_groups_drift_and_exit_status")),
    *(f"tests/test_htmlreport.py::{t}" for t in (
        "test_machine_given_text_never_becomes_markup", "test_a_passed_check_and_a_test_that_is_not_a_check_have_empty_cells",
        "test_the_cells_of_a_failed_a_blocked_and_a_not_checked_check",
        "test_the_summary_is_the_terminals_coloured_as_there_every_line_escaped",
        "test_the_summary_shows_the_machines_header_lines_but_not_the_verdict_twice")),
)


def mutant_patterns(modules: tuple[str, ...]) -> list[str]:
    """``mutmut run``'s mutant names (fnmatch patterns): every mutant of a module, or of its listed functions.
    ``x_NAME*`` is the function's mangled name (mutmut picks the clean run's tests by it) and its mutants'
    (``x_NAME__mutmut_N``); a listed name that is the prefix of another's takes that one in too."""
    patterns = []
    for path in modules:
        dotted = path.removesuffix(".py").replace("/", ".")
        wanted = ONLY_FUNCTIONS.get(path)
        patterns += [f"{dotted}.*"] if wanted is None else [f"{dotted}.{mangled(w)}*" for w in wanted]
    return patterns


def mangled(name: str) -> str:
    """mutmut's name of a function (``x_name``) or a method given as ``Class.name`` (``xǁClassǁname``)."""
    cls, _, function = name.rpartition(".")
    return f"xǁ{cls}ǁ{function}" if cls else f"x_{name}"


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
            m = re.match(r"\s*(gpucheck[\w.]+)\.(x[_ǁ]\w+?)__mutmut_\d+: (\w[\w ]*)", line)
            if not m:
                continue
            module, function, status = m.groups()
            path = module.replace(".", "/") + ".py"
            wanted = ONLY_FUNCTIONS.get(path)
            if wanted is not None and function not in {mangled(w) for w in wanted}:
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
