"""Kafka's broker-level configs as DescribeConfigs and (Incremental)AlterConfigs see them.

Every setting of ``gateway.settings.SETTINGS`` is a broker config. Its value comes from layers,
highest first, as in Kafka's DynamicBrokerConfig: set at runtime for this broker
(DYNAMIC_BROKER_CONFIG), set at runtime for the whole cluster (DYNAMIC_DEFAULT_BROKER_CONFIG),
given at start (STATIC_BROKER_CONFIG), built in (DEFAULT_CONFIG). Only configs the running broker
reads afresh on every use are dynamic, the cluster-wide log configs Kafka also lets change at
runtime; a change is applied to the live ``BrokerConfig`` at once and kept, atomically replaced,
in ``<data>/broker/dynamic_configs.json`` so that it survives restarts.

As a new Kafka 4.1+ cluster, where eligible leader replicas are on (KIP-966), the cluster layer
always holds ``min.insync.replicas``: the first start writes it from the static value (else 1),
as Kafka's controller does before it enables ELR; it cannot be removed, nor set for the broker
alone.
"""
from __future__ import annotations

import enum
import json
import logging
from dataclasses import dataclass
from pathlib import Path

from commitgate.engine.topic_table import atomic_write
from commitgate.gateway.config import BrokerConfig
from commitgate.gateway.settings import SETTINGS, Setting
from commitgate.gateway.topic_configs import TOPIC_CONFIGS, ConfigType

log = logging.getLogger(__name__)

HOUR_MS = 3_600_000
MIN_ISR = "min.insync.replicas"
DYNAMIC = ("log.retention.bytes", "log.retention.ms", "message.max.bytes", MIN_ISR)
# Names of one value, in Kafka's synonym order (DynamicBrokerConfig.brokerConfigSynonyms).
SYNONYM_GROUPS = (("log.retention.ms", "log.retention.hours"),)
# Kafka defines no built-in value for these (log.retention.hours stands in): null until set, and
# no DEFAULT_CONFIG synonym
NO_DEFAULT = frozenset({"log.retention.ms"})
MINIMUMS = {"message.max.bytes": 0, MIN_ISR: 1}
LONG_CONFIGS = frozenset({"log.retention.ms", "log.retention.bytes", "file.reserved.time.ms",
                          "log.retention.check.interval.ms", "commitlog.segment.bytes",
                          "producer.id.expiration.ms"})


class ConfigSource(enum.IntEnum):
    """DescribeConfigs' ConfigSource."""

    TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5


@dataclass(frozen=True)
class Synonym:
    name: str
    value: str | None
    source: ConfigSource


_DEFAULTS = BrokerConfig()


def _show(value: object) -> str | None:
    """A setting's value as Kafka prints it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, enum.Enum):
        return str(value.value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


# the listener settings, resolved together into config.listeners, shown as Kafka writes them
DERIVED = {
    "listeners": lambda c: ",".join(map(str, c.listeners)),
    "advertised.listeners": lambda c: ",".join(f"{s.name}://{c.advertised_endpoint(s.name)}"
                                               for s in c.listeners),
    "listener.security.protocol.map": lambda c: ",".join(f"{s.name}:{s.protocol.value}"
                                                         for s in c.listeners),
}
# PASSWORD configs: described with a null value, as Kafka hides them
SENSITIVE = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                       "ssl.keystore.key"})


def _read(config: BrokerConfig, name: str) -> object:
    if name in DERIVED:
        return DERIVED[name](config)
    owner, _, field = SETTINGS[name].field.rpartition(".")
    holder = {"store": config.store, "security": config.security}.get(owner, config)
    return getattr(holder, field)


def _write(config: BrokerConfig, setting: Setting, value: object) -> None:
    owner, _, name = setting.field.rpartition(".")
    setattr(config.store if owner else config, name, value)


def value_of(config: BrokerConfig, name: str) -> str | None:
    """The value in force of broker config ``name``."""
    if name in SENSITIVE:
        return None
    value = _read(config, name)
    if name == "log.retention.hours":
        return str(value // HOUR_MS)
    return _show(value)


def config_type(name: str) -> ConfigType:
    if name in SENSITIVE:
        return ConfigType.PASSWORD
    default = _read(_DEFAULTS, name)
    if isinstance(default, bool):
        return ConfigType.BOOLEAN
    if isinstance(default, float):
        return ConfigType.DOUBLE
    if isinstance(default, int):
        return ConfigType.LONG if name in LONG_CONFIGS else ConfigType.INT
    return ConfigType.STRING


def names_of(name: str) -> tuple[str, ...]:
    """``name`` and its synonyms, in Kafka's order."""
    return next((group for group in SYNONYM_GROUPS if name in group), (name,))


class BrokerConfigs:
    """The broker's config layers; the only writer of dynamic broker configs."""

    def __init__(self, config: BrokerConfig, path: Path) -> None:
        self.config = config
        self.path = path
        self.per_broker: dict[str, str] = {}
        self.cluster: dict[str, str] = {}
        # what each dynamic config was before any runtime change (static or built in)
        self._started = {name: _read(config, name) for name in DYNAMIC}

    def load(self) -> None:
        """Apply the runtime changes kept from earlier runs (a bad entry is logged, skipped),
        then give the cluster layer its ``min.insync.replicas`` once."""
        data = json.loads(self.path.read_text()) if self.path.exists() else {}
        for layer, kept in ((self.per_broker, data.get("broker", {})),
                            (self.cluster, data.get("cluster", {}))):
            for name, value in kept.items():
                problem = validate({name: value})
                if problem:
                    log.warning("ignoring kept dynamic config %s=%s: %s", name, value, problem)
                else:
                    layer[name] = value
        if MIN_ISR in self.cluster:
            self._apply()
        else:
            self.replace(False, {**self.cluster, MIN_ISR: str(self._started[MIN_ISR])})

    def layer(self, per_broker: bool) -> dict[str, str]:
        return self.per_broker if per_broker else self.cluster

    def replace(self, per_broker: bool, props: dict[str, str]) -> None:
        """Make ``props`` the whole layer (validated by the caller), apply and keep it."""
        layer = self.layer(per_broker)
        layer.clear()
        layer.update(props)
        self._apply()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps({"broker": self.per_broker, "cluster": self.cluster}, sort_keys=True)
        atomic_write(self.path, body.encode())
        log.info("dynamic broker configs now %s (this broker), %s (cluster)", self.per_broker,
                 self.cluster)

    def _apply(self) -> None:
        for name in DYNAMIC:
            setting = SETTINGS[name]
            text = self.per_broker.get(name, self.cluster.get(name))
            _write(self.config, setting,
                   self._started[name] if text is None else setting.parse(text))

    def value(self, name: str) -> str | None:
        """Broker config ``name``'s value as Kafka shows it: a name with synonyms shows its own
        layers only (log.retention.ms is null while only log.retention.hours is set)."""
        if len(names_of(name)) == 1:
            return value_of(self.config, name)
        own = self.synonyms(name)
        return own[0].value if own else None

    def synonyms(self, name: str, per_broker: bool = True) -> list[Synonym]:
        """Kafka's synonym chain: every layer's value of ``name`` and its synonyms, highest
        layer first, from ``name`` itself on (a synonym ranked above it is left out)."""
        names = names_of(name)
        static = {n: v for n, v in self.config.static_properties.items() if n not in SENSITIVE}
        layers = [(self.per_broker, ConfigSource.DYNAMIC_BROKER_CONFIG),
                  (self.cluster, ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
                  (static, ConfigSource.STATIC_BROKER_CONFIG),
                  ({n: value_of(_DEFAULTS, n) for n in names if n not in NO_DEFAULT},
                   ConfigSource.DEFAULT_CONFIG)]
        chain = [Synonym(n, values[n], source) for values, source in layers for n in names
                 if values.get(n) is not None]
        if not per_broker:  # the cluster-default resource shows its own layer only
            chain = [s for s in chain if s.source is ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG]
        while chain and chain[0].name != name:
            chain.pop(0)
        return chain

    def topic_synonyms(self, configs: dict[str, str], name: str) -> list[Synonym]:
        """Topic config ``name``'s chain (DescribeConfigs, the admin API): the topic's own value
        in ``configs``, then the broker config it defaults to, layer by layer."""
        spec = TOPIC_CONFIGS[name]
        chain = [Synonym(name, configs[name], ConfigSource.TOPIC_CONFIG)] if name in configs else []
        if spec.synonym in SETTINGS:
            chain += self.synonyms(spec.synonym)
        elif spec.synonym is not None:  # a Kafka broker config CommitGate has only the default of
            chain.append(Synonym(spec.synonym, spec.default(self.config),
                                 ConfigSource.DEFAULT_CONFIG))
        return chain


def validate(props: dict[str, str]) -> str | None:
    """Why ``props`` cannot be a dynamic layer (Kafka's message), or None."""
    fixed = sorted(name for name in props if name not in DYNAMIC)
    if fixed:
        return f"Cannot update these configs dynamically: [{', '.join(fixed)}]"
    for name, text in props.items():
        problem = _value_error(name, text)
        if problem:
            return f"Invalid value {text} for configuration {name}: {problem}"
    return None


def _value_error(name: str, text: str) -> str | None:
    kind = config_type(name)  # every dynamic config is an INT or a LONG
    try:
        number = int(text.strip(), 10)
    except ValueError:
        return f"Not a number of type {kind.name}"
    bits = 64 if kind is ConfigType.LONG else 32
    if not -2 ** (bits - 1) <= number < 2 ** (bits - 1):
        return f"Not a number of type {kind.name}"
    if number < MINIMUMS.get(name, number):
        return f"Value must be at least {MINIMUMS[name]}"
    return None


def elr_error(per_broker: bool, props: dict[str, str]) -> str | None:
    """Why ``props`` cannot become the broker's (``per_broker``) or the cluster's dynamic layer
    while ELR is on (Kafka 4's ConfigurationControlManager; INVALID_CONFIG), or None."""
    if per_broker and MIN_ISR in props:
        return f"Broker-level {MIN_ISR} cannot be altered while ELR is enabled."
    if not per_broker and MIN_ISR not in props:
        return f"Cluster-level {MIN_ISR} cannot be removed while ELR is enabled."
    return None


def resource_error(resource_name: str, node_id: int, *, describe: bool = False) -> str | None:
    """Why a BROKER resource name is neither this broker's id nor "" (the cluster default);
    Kafka words it differently for DescribeConfigs and for the alter APIs."""
    if resource_name == "":
        return None
    noun, alternative = ("Broker", " or empty string") if describe else ("Node", "")
    try:
        given = int(resource_name)
    except ValueError:
        return f"{noun} id must be an integer, but it is: {resource_name}"
    if given != node_id:
        return (f"Unexpected broker id, expected {node_id}{alternative}, "
                f"but received {resource_name}")
    return None
