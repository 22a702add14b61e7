"""`loop.yaml`: one pydantic model per phase (`models`), loaded with every error at once (`load`).

Each section is also its phase's settings, and the commands generate their options from it
(`options.settings_options`), so every setting has one definition.
"""

from tuneloop.config.base import ConfigPath, Section
from tuneloop.config.gate import BarConfig, GateConfig
from tuneloop.config.load import (
    apply_override,
    dump_config,
    load_config,
    load_yaml_model,
    read_yaml,
)
from tuneloop.config.models import (
    ArchiveConfig,
    DataConfig,
    EvalConfig,
    ExternalConfig,
    LoopConfig,
    ReportConfig,
    ServeConfig,
    ServerConfig,
    SuiteConfig,
    VllmConfig,
)
from tuneloop.config.reference import config_reference
from tuneloop.config.slicing import RollingConfig, SlicingConfig, parse_slice_fractions
from tuneloop.config.train import CompositeConfig, GrpoConfig, LoraConfig, MergeConfig, TrainConfig

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
    "RollingConfig",
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
    "parse_slice_fractions",
    "read_yaml",
]
