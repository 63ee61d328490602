"""Uploading one object to S3 with boto3 (imported here only: the sink's config loads without it).

boto3 is the client because it is the one Python S3 client that does everything an archive needs in one
maintained package: multipart uploads (``s3transfer``: parts, and the upload aborted when a part fails),
request retries with backoff, every way of getting credentials (variables, files, profiles, instance and pod
roles, SSO) and SigV4 against AWS and other S3 APIs (MinIO, Ceph, R2...). It is heavy (botocore's service
models), so it is the ``[s3]`` extra, not part of the base install.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from typing import Any

from adapters.s3.config import CREDENTIALS, S3SinkConfig
from sidecar.api import BuildContext, ConfigValueError
from sidecar.netsink import PeerUnavailable, read_secret

#: One line, when boto3 is missing.
NEEDS_BOTO3 = "the s3 sink needs boto3, in the [s3] extra: pip install 'querylog-sidecar[s3]'"


class UploadFailed(PeerUnavailable):
    """S3 did not store an object: ``code`` is S3's error code (``AccessDenied``...) or an exception type name."""

    def __init__(self, bucket: str, code: str) -> None:
        super().__init__(f"s3 {bucket}: {code}")
        self.code = code


def require_boto3() -> None:
    """:class:`ConfigValueError` (one line naming the extra) when boto3 is not installed."""
    try:
        import boto3  # type: ignore[import-untyped]  # noqa: F401  # boto3 ships no type information
    except ImportError:
        raise ConfigValueError("bucket", NEEDS_BOTO3) from None


def credentials(config: S3SinkConfig, ctx: BuildContext) -> dict[str, str]:
    """The configured credentials as boto3 session arguments (empty: boto3's default chain)."""
    names = ("aws_access_key_id", "aws_secret_access_key", "aws_session_token")
    out: dict[str, str] = {}
    for name, (env_key, file_key, what) in zip(names, CREDENTIALS, strict=True):
        value = read_secret(ctx, getattr(config, env_key), getattr(config, file_key), env_key, file_key, what)
        if value is not None:
            out[name] = value.decode("utf-8").strip()
    return out


class Uploader:
    """Puts objects into one bucket: a single PUT, or a multipart upload from ``multipart_threshold_bytes``."""

    def __init__(self, config: S3SinkConfig, ctx: BuildContext) -> None:
        import boto3  # boto3 and botocore ship no type information (ignored above)
        from boto3.s3.transfer import TransferConfig  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]

        self.bucket = config.bucket
        session = boto3.session.Session(**credentials(config, ctx))
        verify: bool | str = config.verify_tls
        if config.tls_ca_file is not None and config.verify_tls:
            path = ctx.resolve(config.tls_ca_file)
            if not path.is_file():
                raise ConfigValueError("tls_ca_file", f"no such file: {path}")
            verify = str(path)
        self.client: Any = session.client(
            "s3",
            endpoint_url=config.endpoint_url,
            region_name=config.region,
            verify=verify,
            config=Config(
                s3={"addressing_style": config.addressing_style},
                connect_timeout=config.timeout_seconds,
                read_timeout=config.timeout_seconds,
                retries={"mode": "standard", "max_attempts": 3},
                user_agent_extra="querylog-sidecar",
            ),
        )
        self.transfer = TransferConfig(
            multipart_threshold=config.multipart_threshold_bytes,
            multipart_chunksize=config.multipart_chunk_bytes,
            use_threads=False,  # one object at a time from the outbox's sender thread: no pool to leak
        )

    def put(self, key: str, body: bytes, metadata: Mapping[str, str]) -> None:
        """Upload ``body`` under ``key``; :class:`PeerUnavailable` (an error code or type name only) on failure."""
        try:
            self.client.upload_fileobj(
                io.BytesIO(body),
                self.bucket,
                key,
                ExtraArgs={"ContentType": "application/gzip", "Metadata": dict(metadata)},
                Config=self.transfer,
            )
        except Exception as exc:  # botocore/s3transfer errors: the outbox sends the object again later
            raise UploadFailed(self.bucket, error_name(exc)) from None

    def close(self) -> None:
        self.client.close()


def error_name(exc: BaseException) -> str:
    """An S3 error code (``NoSuchBucket``, ``AccessDenied``...) or the exception's type name: never its text, which
    may quote a request."""
    seen: BaseException | None = exc
    while seen is not None:
        response = getattr(seen, "response", None)
        if isinstance(response, dict):
            code = response.get("Error", {}).get("Code")
            if isinstance(code, str) and code.isalnum():
                return code
        seen = seen.__cause__ or seen.__context__
    return type(exc).__name__
