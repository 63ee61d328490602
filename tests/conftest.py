"""Shared fixtures: temporary configs, a test HMAC key, a generated log (helpers live in ``helpers``); and the
fast lane's list of slow tests (``./run test --fast`` runs ``-m "not slow"``; the full ``./run test`` runs all)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import structlog
from helpers import TEST_KEY, TEST_KEY_ENV, GeneratedLog

from sidecar.tools.generate.synthetic import generate_log

if TYPE_CHECKING:
    from tests.packaging.wheelkit import Wheel

# --- the fast lane ---------------------------------------------------------------------------------------
#
# ``./run test --fast`` runs ``-m "not slow"``: it leaves out the tests marked ``slow`` in their file and those
# listed here (one list for the whole suite, so the boundary of the fast lane reads in one place). The seconds
# are those of single runs on the 2-core machine, loaded by other work (call + setup, the range when it varied).

#: Folders and files left out of the fast lane, and why.
SLOW_PATHS: dict[str, str] = {
    "tests/packaging/": "builds the wheel and installs it into fresh virtual environments (20-100 s)",
    "tests/deploy/test_image.py": "the image's stages outside Docker: wheel, fresh venv, kb build, serve (60-120 s)",
    "tests/faults/": "fault injection: kill -9, full disks, 10,000-input fuzz runs (15-70 s each)",
    "tests/adapters/scale/": "Dask clusters and sidecar replicas in subprocesses (10 s and more)",
    "tests/adapters/clickhouse/": "a real clickhouse-server (4 s to start), inserts and restarts",
    "tests/adapters/accesslog/test_nginx.py": "a real nginx, curl, and querylog replay subprocesses (2.5-5 s each)",
    "tests/adapters/accesslog/test_stack_doc.py": "docs/STACK.md's recipes: nginx, curl, querylog replay (5-7 s each)",
    "tests/adapters/accesslog/test_real_queries.py": "39k real queries through the access-log codec three times (5 s)",
    "tests/adapters/grpc/test_ingest_kill9.py": "kill -9 of serve subprocesses (12 s)",
    "tests/adapters/nats/": "a real nats-server per test, JetStream consumers and ack waits (1-9 s each)",
    "tests/adapters/otlp/test_otlp_sink.py": "the sink against our otlp source and a throttling peer (1-3 s each)",
    "tests/adapters/otlp/test_otlp_sink_peers.py": "the sink against throttling gRPC peers, mutual TLS (1-2 s each)",
    "tests/adapters/otlp/test_otlp_throttling.py": "RetryInfo delays waited for, by the sink and the SDK (1-6 s each)",
    "tests/adapters/otlp/test_otlp_bench.py": "bench otlp's two runs, each with a serve subprocess (15-30 s each)",
    "tests/adapters/s3/": "moto's S3 server, objects closed by age, a writer killed -9 (1-6 s each)",
    "tests/tools/test_audit_linkage.py": "generated logs released through the ready chains, then attacked (1-5 s)",
    "tests/sidecar/test_live_audit.py": "serve subprocesses scraped while streams leak or not (1-3 s each)",
    "tests/adapters/microaggregate/test_blocks.py": "worker processes, the CLI in subprocesses (2-12 s each)",
    "tests/filters/dp_replace/test_release.py": "replay subprocesses, kill -9, the audit and bench commands (1-7 s)",
    "tests/sidecar/test_serve.py": "querylog serve subprocesses (1.5-6 s each)",
    "tests/tools/test_audit_html_browser.py": "a headless browser renders the report (1-4 s each)",
    "tests/tools/test_bench_scrub_presidio.py": "Presidio's analyzer, blank and with a spaCy NER model (3-6 s each)",
}

#: Single tests (every parametrisation) left out, by file: ``name`` or ``Class::name`` -> seconds.
SLOW_TESTS: dict[str, dict[str, str]] = {
    "tests/tools/test_audit_linkage.py": {"test_linkage_on_the_real_sample_renamed": "2-11 (39k real lines)"},
    "tests/adapters/ubi/test_real_clicks.py": {"test_real_queries_and_clicks": "16 (69k UBI records from real clicks)"},
    "tests/tools/test_audit_verdicts.py": {"test_microaggregation_copies_identifiers_unless_scrubbed_first": "12-21"},
    "tests/adapters/file/test_filter_command.py": {"test_a_buffered_release_reaches_stdout_while_stdin_is_idle": "31"},
    "tests/adapters/file/test_prescan.py": {
        "test_cli_prescans_by_default_and_says_when_it_cannot": "6",
        "test_without_prescan_future_sends_match": "2.2",
    },
    "tests/adapters/file/test_replay.py": {"test_state_dir_and_fresh_state_keep_archives_apart": "3.2"},
    "tests/sidecar/test_field_policy_formats.py": {
        "test_serve_dead_letters_undeclared_fields_and_counts_them_by_name": "11"
    },
    "tests/adapters/file/test_replay_pipe.py": {"test_what_a_pipe_cannot_do_is_a_clear_usage_error": "3 each"},
    "tests/adapters/forward/test_interop.py": {"test_fluent_client_modes": "4 (node)"},
    "tests/adapters/grpc/test_grpc.py": {"test_filter_passthrough_generated_log": "3"},
    "tests/adapters/grpc/test_grpc_idle.py": {
        "test_graceful_stop_lets_an_inflight_ingest_finish_and_cuts_idle_streams": "3-3.7"
    },
    "tests/adapters/grpc/test_grpc_serve.py": {"test_serve_stops_cleanly_on_sigterm_and_logs_no_values": "2.5"},
    "tests/adapters/microaggregate/test_matched_strings.py": {
        "test_on_the_papers_setup_mdav_loses_far_less_information_than_printed": "6"
    },
    "tests/adapters/microaggregate/test_mdav_distance.py": {
        "test_distance_to_the_average_record_is_eq4_to_the_aggregate": "3",
        "test_the_repetition_term_adds_a_third_of_the_entropy_gap": "2.5",
        "test_fast_distance_equals_the_literal_equations": "1.7",
    },
    "tests/adapters/microaggregate/test_microaggregate.py": {"test_aol_sample_output_is_k_anonymous": "6"},
    "tests/adapters/microaggregate/test_odp.py": {"test_the_aol_sample_keeps_the_invariant": "3"},
    "tests/adapters/s3/test_s3_delivery.py": {
        "test_kill_9_mid_stream_loses_nothing_acknowledged": "6 (a writer process, kill -9, restart)",
        "test_tls_checks_the_endpoint_with_the_configured_ca": "5.5 (a refused certificate retried by botocore)",
    },
    "tests/adapters/s3/test_s3_sink.py": {
        "test_a_large_object_goes_up_in_parts": "5.5 (12 MiB, multipart)",
        "test_real_queries_archived_byte_for_byte": "5.6 (39k real lines)",
    },
    "tests/adapters/microaggregate/test_semantic.py": {
        "TestDistance::test_the_closed_form_is_the_earth_movers_distance": "3",
        "test_the_aol_sample_keeps_the_invariant": "1.7",
    },
    "tests/adapters/microaggregate/test_srp_floor.py": {
        "test_a_released_log_keeps_srp_above_one_over_k_at_every_level": "4.5",
        "test_candidates_are_scored_as_the_audit_measures_ilr_and_srp": "3.7",
        "test_stratified_and_by_category_shares_keep_each_string_s_expected_count_on_average": "3",
    },
    "tests/adapters/vector/test_vector_codec.py": {"TestRoundTrip::test_unchanged_event_is_its_input_bytes": "2"},
    "tests/filters/category_buffer/test_bounded_k.py": {"TestBound::test_python_heap_stays_flat": "2.5"},
    "tests/filters/category_buffer/test_category_buffer.py": {
        "TestSpecialisedHotPath::test_specialised_hot_path_gives_the_helpers_output": "3.6"
    },
    "tests/filters/category_buffer/test_crash_buffer.py": {"test_resume_refuses_outputs_it_cannot_resume": "3-7"},
    "tests/filters/category_buffer/test_store.py": {"test_a_scrubbed_identifier_is_not_held_at_rest": "2"},
    "tests/filters/dp_replace/test_evaluation.py": {
        "test_eval_dp_on_the_aol_sample": "3-5",
        "test_eval_dp_other_bin_and_drop_other": "16",
    },
    "tests/filters/dp_replace/test_filter.py": {
        "test_logs_and_counts_hold_no_values": "2.8-4",
        "test_budget_is_charged_before_release_and_survives_a_rolled_back_batch": "2.5-3.3",
        "test_batch_budget_uses_the_prescan": "2.4-5",
        "test_stream_budget_is_spent_then_suppressed_and_survives_restart": "2.4-5.3",
        "test_randomness_comes_from_the_csprng_unless_seeded": "2.2-3.8",
        "test_a_first_version_ledger_is_adopted": "1.9-4.8",
    },
    "tests/filters/dp_replace/test_mechanism.py": {"test_class_sampler_equals_brute_force": "3.6"},
    "tests/sidecar/test_codecs.py": {  # hypothesis: 60 replays each
        "test_tsv_passthrough_is_byte_identical": "3.7-5",
        "test_jsonl_passthrough_is_byte_identical": "2.3-13",
        "test_tsv_changed_roles_keep_other_columns": "7",
        "test_jsonl_changed_roles_keep_other_keys_order_and_types": "9",
        "test_arbitrary_bytes_never_crash_and_every_line_is_counted": "3.4",
    },
    "tests/sidecar/test_no_leak.py": {"test_replay_subprocess_stderr_has_no_values": "2-8"},
    "tests/sidecar/test_live_audit.py": {"test_on_the_real_sample_the_audit_tells_the_chains_apart": "15-36"},
    "tests/test_examples.py": {"test_example_config_checks": "1-4 each (check-config subprocess)"},
    "tests/tools/test_audit.py": {"TestEndToEnd::test_cli_json_and_html": "2"},
    "tests/tools/test_bench_microaggregate.py": {
        "test_bench_microaggregate_prints_seconds_memory_and_measures_for_a_scaled_log": "1.3-3.5"
    },
    "tests/tools/test_demo.py": {"test_demo_writes_protected_output_and_summary": "3-6.5"},
    "tests/tools/test_eval_srp.py": {
        "test_the_figures_do_not_depend_on_the_hash_seed": "12-35",
        "test_the_cli_prints_counts_only_and_says_where_srp_is_under_the_line": "1.8-5",
        "test_a_query_s_path_is_its_first_noun_s_lexname_then_its_hypernyms": "1.6",
        "test_an_unchanged_log_keeps_everything_and_an_unrelated_one_loses_the_top_level": "2.2",
    },
    "tests/tools/test_generate.py": {"test_cli_writes_gzip_stdout_and_planted_list": "1.3-3.5"},
}


def is_slow(nodeid: str) -> bool:
    """Whether SLOW_PATHS or SLOW_TESTS list the test ``nodeid`` (``tests/x.py::Class::name[param]``)."""
    if any(nodeid.startswith(path) for path in SLOW_PATHS):
        return True
    file, _, name = nodeid.partition("::")
    return name.split("[", 1)[0] in SLOW_TESTS.get(file, {})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests listed in SLOW_PATHS and SLOW_TESTS as ``slow``."""
    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)


@pytest.fixture(autouse=True)
def _structlog_as_it_was() -> Iterator[None]:
    """Each test leaves structlog configured as it found it: a command run in process (``CliRunner``) configures
    logging (a level, a format), which must not hide the log events a later test captures."""
    saved = structlog.get_config()
    yield
    structlog.configure(**saved)


@pytest.fixture
def hmac_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Sets the test HMAC key in the environment; returns the variable's name."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    return TEST_KEY_ENV


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a config file (YAML body) in tmp_path with its state in tmp_path/state."""
    counter = [0]

    def write(body: str, name: str | None = None) -> Path:
        counter[0] += 1
        path = tmp_path / (name or f"config{counter[0]}.yaml")
        text = body if "state_dir:" in body else f"state_dir: state\n{body}"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@pytest.fixture
def debug_structlog() -> Iterator[None]:
    """structlog at debug level for one test (capture_logs keeps the configured level filter)."""
    import logging

    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**old)


@pytest.fixture(scope="session")
def generated_log(tmp_path_factory: pytest.TempPathFactory) -> GeneratedLog:
    """A generated AOL-format log of 400 users with planted identifiers (seed 7)."""
    buf = io.StringIO()
    stats = generate_log(400, 7, buf)
    path = tmp_path_factory.mktemp("generated") / "log.tsv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return GeneratedLog(path, buf.getvalue(), stats)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Wheel:
    """The project's wheel built once per session from a copy of the working tree (tests/packaging, tests/deploy)."""
    from tests.packaging.wheelkit import build_wheel

    return build_wheel(tmp_path_factory.mktemp("build"))
