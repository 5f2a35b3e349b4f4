"""The Lambda functions: one ``StandardFunction`` construct holds the shared defaults once.

Every function: Python 3.12 on arm64 (the layer is built for exactly that:
scripts/build_layer.py), X-Ray active tracing, its own log group with a set
retention, Powertools configured by environment (service name, log level,
metrics namespace), and the ``memstack`` layer. Handlers are the thin
``lambdas/<name>/handler.py`` modules; the configuration they read is the
``MEMSTACK_*`` environment (layers/memstack/settings.py).
"""

from __future__ import annotations

from pathlib import Path

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct
from memstack.startup import LIBRARY_ENVIRONMENT

from stacks.config import ConfigError, StackConfig

RUNTIME = lambda_.Runtime.PYTHON_3_12
ARCHITECTURE = lambda_.Architecture.ARM_64
METRICS_NAMESPACE = "memstack"

_RETENTION = {
    1: logs.RetentionDays.ONE_DAY,
    3: logs.RetentionDays.THREE_DAYS,
    5: logs.RetentionDays.FIVE_DAYS,
    7: logs.RetentionDays.ONE_WEEK,
    14: logs.RetentionDays.TWO_WEEKS,
    30: logs.RetentionDays.ONE_MONTH,
    60: logs.RetentionDays.TWO_MONTHS,
    90: logs.RetentionDays.THREE_MONTHS,
    180: logs.RetentionDays.SIX_MONTHS,
    365: logs.RetentionDays.ONE_YEAR,
}


def retention(days: int) -> logs.RetentionDays:
    try:
        return _RETENTION[days]
    except KeyError:
        raise ConfigError(f"log_retention_days must be one of {sorted(_RETENTION)}; got {days}") from None


def memstack_layer(scope: Construct, cid: str, config: StackConfig) -> lambda_.LayerVersion:
    """The prebuilt layer folder; synth stops with the fix when it has not been built."""
    layer_dir = Path(config.layer_dir)
    if not (layer_dir / "python" / "memstack").is_dir():
        raise ConfigError(
            f"the Lambda layer is not built ({layer_dir}/python/memstack is missing): "
            "run `make layer` (python scripts/build_layer.py) and synth again"
        )
    return lambda_.LayerVersion(
        scope,
        cid,
        code=lambda_.Code.from_asset(str(layer_dir)),
        compatible_runtimes=[RUNTIME],
        compatible_architectures=[ARCHITECTURE],
        description="memstack core library and its runtime dependencies",
        removal_policy=RemovalPolicy.DESTROY,
    )


class StandardFunction(Construct):
    """A memstack Lambda with the project's defaults; ``function`` is the underlying ``lambda_.Function``."""

    def __init__(
        self,
        scope: Construct,
        cid: str,
        *,
        config: StackConfig,
        handler_dir: str,
        layer: lambda_.ILayerVersion,
        memory_mb: int,
        timeout: Duration,
        environment: dict[str, str],
        description: str,
    ) -> None:
        super().__init__(scope, cid)
        code_dir = Path(config.lambdas_dir) / handler_dir
        if not (code_dir / "handler.py").is_file():
            raise ConfigError(
                f"missing Lambda handler {code_dir}/handler.py (expected `def handler(event, context)`)"
            )
        self.log_group = logs.LogGroup(
            self, "Logs", retention=retention(config.log_retention_days), removal_policy=RemovalPolicy.DESTROY
        )
        self.function = lambda_.Function(
            self,
            "Function",
            description=description,
            runtime=RUNTIME,
            architecture=ARCHITECTURE,
            handler="handler.handler",
            code=lambda_.Code.from_asset(str(code_dir), exclude=["__pycache__", "*.pyc"]),
            layers=[layer],
            memory_size=memory_mb,
            timeout=timeout,
            tracing=lambda_.Tracing.ACTIVE,
            log_group=self.log_group,
            environment={
                "POWERTOOLS_SERVICE_NAME": config.service_name,
                "POWERTOOLS_LOG_LEVEL": config.log_level,
                "POWERTOOLS_METRICS_NAMESPACE": METRICS_NAMESPACE,
                **LIBRARY_ENVIRONMENT,
                **environment,
            },
        )
