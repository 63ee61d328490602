"""Options of the ``s3`` sink."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sidecar.api import ConfigValueError, OutboxOptions, SinkConfig, check_env_name, option

_OUTBOX_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
#: S3 bucket names (the DNS-compatible rules: 3-63 lower-case letters, digits, dots and hyphens).
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
MIB = 1024 * 1024
#: S3's smallest part of a multipart upload (all but the last).
MIN_PART = 5 * MIB

#: (env option, file option, what) of each credential.
CREDENTIALS = (
    ("access_key_id_env", "access_key_id_file", "S3 access key id"),
    ("secret_access_key_env", "secret_access_key_file", "S3 secret access key"),
    ("session_token_env", "session_token_file", "S3 session token"),
)


@dataclass(frozen=True)
class S3SinkConfig(OutboxOptions, SinkConfig):
    """Archive released events as gzip objects in an S3 bucket (AWS S3, MinIO, any S3 API).

    Each object holds the records in their source's text format exactly as the `file` sink writes them (a TSV
    input's header line first, then one record per line, every line ending with a newline), gzip-compressed.
    Every flush stages what was written in the state database (durable: it is acknowledged then); an object is
    closed once it holds `max_object_bytes` or its first record is `max_object_seconds` old, and goes through the
    sink's outbox: uploaded at least once, retried with backoff while S3 refuses it, a multipart upload above
    `multipart_threshold_bytes`. Keys are `<prefix><UTC time>-<run id>-<sequence>.<format>.gz` with `prefix`'s
    strftime placeholders filled from the object's first record time (UTC): two objects never share a key, and a
    retried upload writes the key it was given, so one object is never stored twice. Credentials come from
    environment variables or files named here, else from boto3's default chain (AWS_* variables, ~/.aws,
    instance or pod roles). Needs boto3: `pip install 'querylog-sidecar[s3]'`.
    """

    bucket: str = option(doc="Bucket to write into (it must exist).")
    prefix: str = option(
        "querylog/%Y/%m/%d/",
        "Key prefix; strftime placeholders (`%Y`, `%m`, `%d`, `%H`...) take the object's first record time (UTC).",
    )
    format: Literal["auto", "tsv", "jsonl", "access_log"] = option(
        "auto",
        "Records' format, as the file sink's `format`: auto is the schema's format, else each record in its own "
        "source's text format (records from gRPC, forward or Vector as TSV).",
    )
    max_object_bytes: int = option(
        64 * MIB, "Close an object once its uncompressed records reach this many bytes.", min=1024
    )
    max_object_seconds: float = option(
        300.0, "Close an object once its first record is this old (also when no more records come).", gt=0
    )
    compresslevel: int = option(6, "gzip level (1 fastest .. 9 smallest).", min=1, max=9)
    endpoint_url: str | None = option(
        None, "The S3 API's URL (`http://127.0.0.1:9000` for MinIO...); null: AWS S3 of `region`."
    )
    region: str = option("us-east-1", "Region (signing, and AWS S3's endpoint).")
    addressing_style: Literal["auto", "path", "virtual"] = option(
        "auto", "Bucket in the path (`path`: MinIO, most S3 APIs) or in the host name (`virtual`)."
    )
    verify_tls: bool = option(True, "Check the endpoint's TLS certificate (https).")
    tls_ca_file: str | None = option(None, "PEM CA certificate(s) to check the endpoint's certificate with.")
    access_key_id_env: str | None = option(None, "Environment variable holding the access key id.", secret_ref=True)
    access_key_id_file: str | None = option(None, "File holding the access key id.", secret_ref=True)
    secret_access_key_env: str | None = option(
        None, "Environment variable holding the secret access key.", secret_ref=True
    )
    secret_access_key_file: str | None = option(None, "File holding the secret access key.", secret_ref=True)
    session_token_env: str | None = option(
        None, "Environment variable holding a session token (temporary credentials).", secret_ref=True
    )
    session_token_file: str | None = option(None, "File holding a session token.", secret_ref=True)
    multipart_threshold_bytes: int = option(
        16 * MIB, "Upload a (compressed) object this large or larger in parts (multipart upload).", min=MIN_PART
    )
    multipart_chunk_bytes: int = option(16 * MIB, "Size of each part of a multipart upload.", min=MIN_PART)
    timeout_seconds: float = option(60.0, "Connect and read timeout of one request to S3.", gt=0)
    outbox_name: str | None = option(
        None, "Name of this sink's outbox (letters, digits, _; null: `s3_` and the bucket and prefix)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        if not _BUCKET.fullmatch(str(self.bucket)) or ".." in self.bucket:
            raise ConfigValueError("bucket", "an S3 bucket name: 3-63 lower-case letters, digits, '.' or '-'")
        if any(ord(c) < 32 or ord(c) == 127 for c in self.prefix) or self.prefix.startswith("/"):
            raise ConfigValueError("prefix", "a key prefix has no control characters and does not start with '/'")
        if len(self.prefix.encode("utf-8")) > 512:
            raise ConfigValueError("prefix", "at most 512 bytes (a key is at most 1024)")
        for env_key, file_key, _what in CREDENTIALS:
            if getattr(self, env_key) is not None and getattr(self, file_key) is not None:
                raise ConfigValueError(file_key, f"Set {env_key} or {file_key}, not both")
            check_env_name(env_key, getattr(self, env_key))
        key_id = self.access_key_id_env is not None or self.access_key_id_file is not None
        secret = self.secret_access_key_env is not None or self.secret_access_key_file is not None
        if key_id != secret:
            raise ConfigValueError("secret_access_key_env", "set the access key id and the secret access key together")
        token = self.session_token_env is not None or self.session_token_file is not None
        if token and not key_id:
            raise ConfigValueError("session_token_env", "a session token goes with an access key id and secret")
        if self.endpoint_url is not None and not str(self.endpoint_url).startswith(("http://", "https://")):
            raise ConfigValueError("endpoint_url", "must be http://host[:port] or https://...")
        if self.outbox_name is not None and not _OUTBOX_NAME.fullmatch(self.outbox_name):
            raise ConfigValueError("outbox_name", "must be 1-64 ASCII letters, digits or _")
