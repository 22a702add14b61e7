"""`loop.yaml`: one pydantic model per phase (`models`), loaded with every error at once (`load`).

The models are the config's public face; phase code never receives them — the loop unpacks
them into plain typed arguments.
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
    SuiteConfig,
    TrainConfig,
    VllmConfig,
)
from tuneloop.config.reference import config_reference

__all__ = [
    "ArchiveConfig",
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
