"""What every task of a scaled replay needs to know (picklable, sent to the workers)."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from sidecar.config import LoadedConfig, load_config
from sidecar.gctune import tune_gc


@dataclass(frozen=True)
class Job:
    """One scaled replay: the config, where state and work files live, how the input is cut."""

    config_file: str
    #: the base state folder (absolute); partition ``p`` keeps its state in :meth:`partition_dir`
    state_dir: str
    #: number of partitions
    partitions: int
    #: this run's work folder (shards, partition inputs and outputs); removed when the run completes
    run_dir: str
    run_id: str
    key: bytes
    #: ``tsv`` or ``jsonl``
    fmt: str
    header: str | None
    seed: int | None = None
    prescan: bool | None = None
    #: input lines between two commits of a partition (output fsync + state transaction)
    commit_lines: int = 20_000

    def config(self, state_dir: str | None = None) -> LoadedConfig:
        """The config as loaded on this worker, with its state folder replaced (default: the base one)."""
        cfg = load_config(self.config_file)
        folder = os.path.abspath(state_dir or self.state_dir)
        return dataclasses.replace(cfg, sidecar=dataclasses.replace(cfg.sidecar, state_dir=folder))

    def partition_dir(self, p: int) -> str:
        """The state folder of partition ``p`` (its SQLite database and dead letters)."""
        return partition_dir(self.state_dir, p, self.partitions)

    def path(self, name: str) -> Path:
        return Path(self.run_dir) / name


def exit_with_parent(poll_seconds: float = 0.5) -> None:
    """Initializer of a local worker process: it exits when the process that started it is gone (the parent
    killed with kill -9 leaves no worker running on: a watchdog thread sees the parent pid change).

    Exiting in the middle of a partition task is a kill -9 of that task, which a partition survives (its
    position commits with its state); the parent's rerun with ``--resume`` continues it."""
    parent = os.getppid()

    def watch() -> None:
        while not threading.Event().wait(poll_seconds):
            if os.getppid() != parent:
                os._exit(1)

    threading.Thread(target=watch, name="querylog-orphan-watch", daemon=True).start()


_gc_tuned = False


def tune_gc_once() -> None:
    """:func:`~sidecar.gctune.tune_gc` once per worker process, after its first chain or codec is built (as
    ``replay`` does: the knowledge base then leaves the collector's scans, which halves decoding's CPU)."""
    global _gc_tuned
    if not _gc_tuned:
        _gc_tuned = True
        tune_gc()


def partition_dir(state_dir: str, p: int, n: int) -> str:
    """``STATE_DIR/partitions/PPPP-of-NNNN``: one state store per partition, per partition count."""
    return os.path.join(state_dir, "partitions", f"{p:04d}-of-{n:04d}")


def private_folder(folder: Path) -> Path:
    """``folder`` (and missing parents) created, mode 0700: a run's work files are raw input records."""
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(folder, 0o700)
    return folder


def private_file(path: Path | str) -> BinaryIO:
    """``path`` opened for writing (truncated), mode 0600 whatever the umask: shards hold raw input records."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    os.fchmod(fd, 0o600)
    return os.fdopen(fd, "wb")


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` all or nothing: a temporary file, fsync, rename, fsync of the folder."""
    tmp = path.with_name(path.name + ".tmp")
    with private_file(tmp) as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_json(path: Path, obj: object) -> None:
    write_atomic(path, json.dumps(obj, sort_keys=True).encode("utf-8"))


def fsync_dir(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
