"""`loop.yaml`: one pydantic model per phase (`models`), loaded with every error at once (`load`).

Each section is also its phase's settings, and the commands generate their options from it
(`options.settings_options`), so every setting has one definition.
"""

from tuneloop.config.load import (
    apply_override,
    dump_config,
    load_config,
    load_yaml_model,
    read_yaml,
)
from tuneloop.config.models import (
    ArchiveConfig,
    BarConfig,
    CompositeConfig,
    ConfigPath,
    DataConfig,
    EvalConfig,
    ExternalConfig,
    GateConfig,
    GrpoConfig,
    LoopConfig,
    LoraConfig,
    MergeConfig,
    ReportConfig,
    Section,
    ServeConfig,
    ServerConfig,
    SlicingConfig,
    SuiteConfig,
    TrainConfig,
    VllmConfig,
)
from tuneloop.config.reference import config_reference

__all__ = [
    "ArchiveConfig",
    "BarConfig",
    "CompositeConfig",
    "ConfigPath",
    "DataConfig",
    "EvalConfig",
    "ExternalConfig",
    "GateConfig",
    "GrpoConfig",
    "LoopConfig",
    "LoraConfig",
    "MergeConfig",
    "ReportConfig",
    "Section",
    "ServeConfig",
    "ServerConfig",
    "SlicingConfig",
    "SuiteConfig",
    "TrainConfig",
    "VllmConfig",
    "apply_override",
    "config_reference",
    "dump_config",
    "load_config",
    "load_yaml_model",
    "read_yaml",
]
