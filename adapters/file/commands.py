"""``querylog replay`` (a log file through the configured chain) and ``querylog filter`` (stdin to stdout).

The commands only parse options: the one-process replay is the runtime's driver (:func:`sidecar.drive.replay`:
the ``file`` source into ``Runtime.receive``), ``--workers``/``--scheduler`` the partitioned replay of
:mod:`adapters.file.scale` (one runtime per partition, the same driver shape). They are registered here, not in
``sidecar.cli``, because ``--workers`` reaches :mod:`adapters.file.scale`, which ``sidecar.cli`` may not import.
"""

from __future__ import annotations

import dataclasses
import os
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from adapters.file.outcome import EXIT_EMPTY, RunCounts, empty_run
from sidecar.api import SinkError
from sidecar.commandkit import EXIT_USAGE, fail_config, fail_state, load, setup_logs
from sidecar.config import ConfigError
from sidecar.state import StateError, StateInUse, remove_state_database

if TYPE_CHECKING:
    from adapters.file.scale.replay import ScaleSummary
    from sidecar.drive import ReplaySummary

CONFIG = click.option(
    "--config", "-c", "config_file", required=True, type=click.Path(dir_okay=False), help="Config file."
)
FLUSH_INTERVAL = click.option(
    "--flush-interval",
    default=None,
    type=click.FloatRange(min=0.01),
    help="Reading a pipe: seconds between asks to buffering filters to release (written out at once, also while "
    "the input is idle); default: the config's flush_interval_seconds.",
)
ALLOW_EMPTY = click.option(
    "--allow-empty",
    is_flag=True,
    help="Exit 0 when every event was dropped or dead-lettered (default: exit 5, with the likeliest cause).",
)
STATE_DIR = click.option(
    "--state-dir",
    default=None,
    type=click.Path(file_okay=False),
    help="State folder for this run (default: the config's state_dir); give each archive its own.",
)


@click.command("replay")
@CONFIG
@click.argument("input_path", metavar="INPUT")
@click.option(
    "--output", "-o", default=None, help="Output file (.gz compresses); default: the configured sinks, else stdout."
)
@click.option("--seed", type=int, default=None, help="Seed the random choices (tests and benchmarks only).")
@click.option("--progress/--no-progress", default=None, help="Progress bar (default: on a terminal).")
@click.option(
    "--resume",
    is_flag=True,
    help="Exactly once across crashes; rerun with it to continue. Output (fsynced), input position and state "
    "commit together every 50 batches; with --workers each partition commits every 20,000 input lines whether "
    "or not --resume is given, and --resume continues the unfinished run instead of starting anew.",
)
@click.option(
    "--prescan/--no-prescan",
    default=None,
    help="Read the input once first, so category_buffer never pairs a user with a text they send later. "
    "Default: on when the chain has category_buffer and the input is a file (skipped, with a logged reason, "
    "when it cannot be); --prescan makes it required, --no-prescan replays as a live stream would.",
)
@STATE_DIR
@click.option(
    "--fresh-state",
    "--reset-state",
    "fresh_state",
    is_flag=True,
    help="Start from empty state: delete the state database (held events, profiles) in the state folder first.",
)
@FLUSH_INTERVAL
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(min=1),
    help="Partitions by a keyed hash of the user, each through the chain with its own state, on Dask "
    "(the [dask] extra); 1 without --scheduler: one process, no Dask. See docs/SCALE.md.",
)
@click.option(
    "--scheduler",
    default=None,
    help="Dask scheduler for the partitions: a distributed scheduler address (tcp://HOST:PORT), or "
    "processes (the default with --workers N > 1), threads or synchronous.",
)
@click.option(
    "--split",
    is_flag=True,
    help="With --workers/--scheduler: one output file per partition (OUTPUT.part-PPPP-of-NNNN.EXT) instead of one log.",
)
@ALLOW_EMPTY
def replay_cmd(
    config_file: str,
    input_path: str,
    output: str | None,
    seed: int | None,
    progress: bool | None,
    resume: bool,
    prescan: bool | None,
    state_dir: str | None,
    fresh_state: bool,
    flush_interval: float | None,
    workers: int,
    scheduler: str | None,
    split: bool,
    allow_empty: bool,
) -> None:
    """Replay a log file (TSV or JSON lines, .gz; `-` = stdin; a named pipe or `<(zcat f.gz)` is read as it
    comes, like stdin) through the chain. With --workers N > 1 or --scheduler, INPUT may also be a glob or a
    folder of (daily) files, and -o OUTPUT is required."""
    if workers > 1 or scheduler is not None:
        summary = _run_scaled(
            config_file, input_path, output, seed, resume, prescan, state_dir, fresh_state, workers, scheduler, split
        )
        if not summary.already_done:
            _refuse_empty(summary, allow_empty, "", state_dir or str(load(config_file).state_dir))
        return
    if split:
        click.echo("--split needs --workers N > 1 or --scheduler", err=True)
        sys.exit(EXIT_USAGE)
    done = _run_replay(
        config_file, input_path, output, seed, progress, resume, prescan, state_dir, fresh_state, flush_interval
    )
    if not done.interrupted:
        _refuse_empty(done, allow_empty, done.input_format, done.state_dir)


def _refuse_empty(summary: RunCounts, allow_empty: bool, input_format: str, state_dir: str) -> None:
    """Exit :data:`EXIT_EMPTY` with one line when every event was dropped or dead-lettered (not ``allow_empty``)."""
    line = empty_run(summary, input_format, state_dir)
    if line is not None and not allow_empty:
        click.echo(line, err=True)
        sys.exit(EXIT_EMPTY)


def _run_scaled(
    config_file: str,
    input_path: str,
    output: str | None,
    seed: int | None,
    resume: bool,
    prescan: bool | None,
    state_dir: str | None,
    fresh_state: bool,
    workers: int,
    scheduler: str | None,
    split: bool,
) -> ScaleSummary:
    """``replay --workers N`` / ``--scheduler``: partitions on Dask (imported only here)."""
    try:
        from adapters.file.scale.replay import ScaleError, scaled_replay
    except ImportError as exc:
        click.echo(f"--workers/--scheduler need Dask: pip install 'querylog-sidecar[dask]' ({exc.name})", err=True)
        sys.exit(EXIT_USAGE)
    from adapters.file.scale.inputs import InputError
    from adapters.file.scale.partition import PartitionKeyError
    from sidecar.drive import PrescanError

    cfg = load(config_file)
    setup_logs(cfg)
    try:
        summary = scaled_replay(
            config_file,
            input_path,
            output or "",
            workers=workers,
            scheduler=scheduler,
            split=split,
            seed=seed,
            resume=resume,
            prescan=prescan,
            state_dir=state_dir,
            fresh_state=fresh_state,
        )
    except ConfigError as exc:
        fail_config(exc)
    except (StateError, StateInUse) as exc:
        fail_state(exc)
    except (ScaleError, InputError, PartitionKeyError, PrescanError) as exc:
        click.echo(f"replay: {exc}", err=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:
        click.echo(f"{exc.filename or input_path}: {exc.strerror or type(exc).__name__}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(summary.line(), err=True)
    return summary


@click.command("filter")
@CONFIG
@FLUSH_INTERVAL
@STATE_DIR
@ALLOW_EMPTY
@click.option(
    "--confirm",
    is_flag=True,
    help='rsyslog omprog (confirmMessages="on"): output to the configured sinks, stdout carries one line per '
    "input line: OK once its record is durable (delivered, held or dead-lettered), else ERROR <reason> (rsyslog "
    "sends it again); OK first when ready.",
)
def filter_cmd(
    config_file: str, flush_interval: float | None, state_dir: str | None, allow_empty: bool, confirm: bool
) -> None:
    """Records on stdin, protected records on stdout, as they come: an exec/pipe stage for Fluent Bit,
    Vector or a shell pipe (`replay - -o -` with a timed release). Ends at EOF or SIGTERM, after a final flush.
    With --confirm: rsyslog's omprog protocol (the output goes to the configured sinks)."""
    if confirm:
        _run_confirm(config_file, flush_interval, state_dir)
        return
    done = _run_replay(config_file, "-", "-", None, False, False, False, state_dir, False, flush_interval)
    if not done.interrupted:
        _refuse_empty(done, allow_empty, done.input_format, done.state_dir)


def _run_confirm(config_file: str, flush_interval: float | None, state_dir: str | None) -> None:
    """``filter --confirm`` (:mod:`sidecar.confirm`): errors as ``replay``'s, before the first ``OK``."""
    from sidecar.api import ConfigValueError
    from sidecar.confirm import ConfirmError, confirm
    from sidecar.signals import StopFlag

    cfg = load(config_file)
    setup_logs(cfg)
    if state_dir is not None:
        cfg = dataclasses.replace(cfg, sidecar=dataclasses.replace(cfg.sidecar, state_dir=os.path.abspath(state_dir)))
    stop = StopFlag()
    stop.install()
    try:
        summary = confirm(cfg, stop, flush_interval or cfg.sidecar.flush_interval_seconds)
    except ConfirmError as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_USAGE)
    except ConfigValueError as exc:  # the schema's roles are no columns of schema.columns
        key = f"schema.{exc.key.removeprefix('schema.')}"
        fail_config(ConfigError(str(cfg.file), cfg.doc.line(key), key, exc.problem, exc.allowed))
    except ConfigError as exc:
        fail_config(exc)
    except (StateError, StateInUse) as exc:
        fail_state(exc)
    except sqlite3.Error as exc:  # e.g. disk full on the state folder
        fail_state(StateError(cfg.state_dir / "querylog.db", f"cannot be written ({exc})"))
    except OSError as exc:  # an output that cannot take what is left at the end: the path and the reason
        click.echo(f"{exc.filename or 'output'}: {exc.strerror or type(exc).__name__}", err=True)
        sys.exit(1)
    click.echo(summary.line(), err=True)


def _run_replay(
    config_file: str,
    input_path: str,
    output: str | None,
    seed: int | None,
    progress: bool | None,
    resume: bool,
    prescan: bool | None,
    state_dir: str | None,
    fresh_state: bool,
    flush_interval: float | None,
) -> ReplaySummary:
    from sidecar.drive import PrescanError, ResumeError, replay
    from sidecar.signals import StopFlag

    cfg = load(config_file)
    setup_logs(cfg)
    if state_dir is not None:
        cfg = dataclasses.replace(cfg, sidecar=dataclasses.replace(cfg.sidecar, state_dir=os.path.abspath(state_dir)))
    if fresh_state:
        if resume:
            click.echo("--fresh-state and --resume contradict each other", err=True)
            sys.exit(EXIT_USAGE)
        try:
            removed = remove_state_database(cfg.state_dir)
        except StateInUse as exc:
            fail_state(exc)
        if removed:
            click.echo(f"state: removed the state database in {cfg.state_dir}", err=True)
    if input_path != "-" and (Path(input_path).is_dir() or not Path(input_path).exists()):  # a pipe is read as it comes
        click.echo(f"{input_path}: {'a directory' if Path(input_path).is_dir() else 'no such file'}", err=True)
        sys.exit(EXIT_USAGE)
    stop = StopFlag()
    stop.install()
    show = sys.stderr.isatty() if progress is None else progress
    try:
        summary = replay(
            cfg,
            input_path,
            output,
            seed=seed,
            progress=show,
            stop=stop,
            resume=resume,
            prescan=prescan,
            flush_interval=flush_interval if flush_interval is not None else cfg.sidecar.flush_interval_seconds,
        )
    except ConfigError as exc:
        fail_config(exc)
    except (StateError, StateInUse) as exc:
        fail_state(exc)
    except sqlite3.Error as exc:  # e.g. disk full on the state folder
        fail_state(StateError(cfg.state_dir / "querylog.db", f"cannot be written ({exc})"))
    except SinkError as exc:  # a sink an operator must fix (a table that does not match): one line, no values
        click.echo(f"replay: {exc}", err=True)
        sys.exit(1)
    except (ResumeError, PrescanError) as exc:
        click.echo(str(exc), err=True)
        sys.exit(EXIT_USAGE)
    except OSError as exc:  # unwritable output or state folder: the path and the reason, no traceback
        click.echo(f"{exc.filename or input_path}: {exc.strerror or type(exc).__name__}", err=True)
        sys.exit(EXIT_USAGE)
    click.echo(summary.line(), err=True)
    return summary
