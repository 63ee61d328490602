"""The sidecar's configuration: the file's model (:mod:`.model`) and the located YAML loader (:mod:`.loader`)."""

from sidecar.config.loader import (
    ConfigError,
    ConfigErrors,
    ErrorCollector,
    Located,
    build_config,
    describe_config,
    load_yaml,
)
from sidecar.config.model import (
    ComponentSpec,
    LimitsConfig,
    LoadedConfig,
    LoggingConfig,
    SidecarConfig,
    load_config,
)

__all__ = [
    "ComponentSpec",
    "ConfigError",
    "ConfigErrors",
    "ErrorCollector",
    "LimitsConfig",
    "LoadedConfig",
    "Located",
    "LoggingConfig",
    "SidecarConfig",
    "build_config",
    "describe_config",
    "load_config",
    "load_yaml",
]
