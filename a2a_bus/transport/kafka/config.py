"""Settings of the Kafka transport, with SASL/SSL pass-through and ``from_env``."""

from __future__ import annotations

import ipaddress
import math
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from aiokafka.conn import collect_hosts
from aiokafka.helpers import create_ssl_context

from a2a_bus.runtime.env import EnvError, choice, seconds, switch, whole

ENV_PREFIX = "A2A_KAFKA_"
CONTENT_MODES = ("structured", "binary")
DELIVERY_MODES = ("at_least_once", "exactly_once")
#: The delivery mode's own variable (also read as ``A2A_KAFKA_DELIVERY``).
DELIVERY_ENV = "A2A_DELIVERY"
#: What aiokafka accepts; anything else it refuses only when the bus starts.
COMPRESSION_TYPES = ("gzip", "snappy", "lz4", "zstd")
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "GSSAPI", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")
#: The settings that name one of a few values (read case-insensitively).
_CHOICES: dict[str, tuple[str, ...]] = {
    "content_mode": CONTENT_MODES,
    "delivery": DELIVERY_MODES,
    "compression_type": COMPRESSION_TYPES,
    "security_protocol": SECURITY_PROTOCOLS,
    "sasl_mechanism": SASL_MECHANISMS,
}
#: The whole-number settings a variable may set to 0 (no wait, no pause, no retry,
#: no de-duplication); every other one must be at least 1: 0 would stall the
#: transport, or aiokafka or the broker would refuse it.
_MAY_BE_ZERO = frozenset(
    {
        "dedup_window",
        "max_retries",
        "transaction_retry_backoff_ms",
        "transaction_commit_interval_ms",
        "linger_ms",
        "fetch_max_wait_ms",
        "inbox_fetch_max_wait_ms",
        "nondurable_fetch_max_wait_ms",
        "commit_interval_ms",
    }
)
#: The durations in seconds a variable may set to 0 (a stop that does not wait).
_SECONDS_MAY_BE_ZERO = frozenset({"drain_timeout"})
#: A host name as a resolver takes it (an IP address is checked as one).
_HOST_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")


def bootstrap_problem(servers: object, name: str = "bootstrap_servers") -> str | None:
    """Why ``name=servers`` names no bootstrap servers aiokafka can use (None: it
    does). aiokafka itself refuses a port that is no number only when the bus
    starts, deep in its connection code, and takes an empty host or one with a
    space as given."""
    try:
        hosts = collect_hosts(servers, randomize=False) if isinstance(servers, str) else []
    except ValueError:  # a port that is no number, an unclosed [
        hosts = []
    if hosts and all(_usable_host(host) and 0 < port < 65536 for host, port, _ in hosts):
        return None
    return f"{name}={servers!r}: expected HOST[:PORT], comma-separated"


def _usable_host(host: str) -> bool:
    if _HOST_NAME.fullmatch(host):
        return True
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class KafkaSettings:
    """Everything the Kafka transport needs to reach and use a cluster.

    The tuning defaults favour latency on a local broker; see ``docs/kafka.md``.
    Security fields are handed to aiokafka unchanged, so any cluster aiokafka
    can reach (SASL PLAIN/SCRAM/OAUTHBEARER/GSSAPI, TLS, mTLS) works.
    """

    bootstrap_servers: str = "127.0.0.1:9092"
    client_id: str | None = None
    #: Partitions and replication factor of topics the transport creates.
    partitions: int = 3
    replication_factor: int = 1
    #: Partitions of the agent inbox topics the inbox consumer creates: more let
    #: several processes hosting one agent share its requests; each one costs
    #: every idle fetch of that consumer Python work, and the broker's creation.
    #: A process of many agents, each in one process, does better with 1.
    inbox_partitions: int = 3
    #: ``min.insync.replicas`` of topics the transport creates (None: the broker's
    #: default). With ``acks=all`` a write needs this many replicas in sync.
    min_insync_replicas: int | None = None
    dlq_topic: str = "a2a.dlq"
    #: How published events are written: ``structured`` (the JSON event format
    #: as the value, one ``content-type`` header; cheaper to write and read) or
    #: ``binary`` (attributes as ``ce_`` headers, the data as the value). Both
    #: are read whatever this says.
    content_mode: str = "structured"
    #: Size of the (source, id) de-duplication window, per subscription.
    dedup_window: int = 10_000
    #: Attempts to write a dead letter the broker refuses before giving up on it
    #: (logged as lost); one it cannot take for now (away, a timeout) is tried until written.
    max_retries: int = 5
    #: Records a consumer may hand out beyond its last commit before it must
    #: record a new lease (see "Redelivery" in docs/kafka.md).
    redelivery_lease: int = 1_000
    #: Seconds ``stop()`` and a revocation wait for in-flight handlers.
    drain_timeout: float = 10.0
    #: Seconds ``subscribe()`` waits for the first partition assignment.
    join_timeout: float = 30.0
    #: How long a record may wait for the broker's acknowledgement (the broker
    #: away, a leader moving), retried meanwhile, before its publisher gets
    #: ``NotDelivered`` (-32001). A request's own deadline ends its wait sooner.
    delivery_timeout_ms: int = 120_000
    #: ``at_least_once`` (the default) or ``exactly_once``: consume-handle-produce
    #: in Kafka transactions, every consumer ``read_committed`` (see "Exactly once"
    #: in docs/kafka.md).
    delivery: str = "at_least_once"
    #: exactly_once: how long the broker keeps a transaction of a crashed process
    #: open (read_committed readers of its partitions wait that long, plus the
    #: broker's abort check, for a killed replica's transaction to be aborted).
    transaction_timeout_ms: int = 10_000
    #: exactly_once: how long a transactional producer waits before it sends again
    #: what the broker refused with a retriable error. A broker that checks each
    #: transactional write against its transaction (Kafka 3.6 and later) answers an
    #: older client such as aiokafka NOT_ENOUGH_REPLICAS now and then; aiokafka's
    #: default of 100 ms then adds 100 ms to that answer (see docs/kafka.md).
    transaction_retry_backoff_ms: int = 20
    #: exactly_once: the pause after a member's transaction before its next one. Its
    #: answers wait for that transaction, so by default it starts as soon as the last
    #: one ended (with records finished meanwhile); ``commit_interval_ms`` is the
    #: pause of the at-least-once commits, which carry no answers.
    transaction_commit_interval_ms: int = 0
    #: exactly_once: this replica's stable name in its transactional ids
    #: (``<replica>.<group>``); a replica restarted under the same name fences its
    #: old self at once. None: ``<host>-<pid>``, unique but not stable.
    transactional_id: str | None = None
    # Producer tuning.
    linger_ms: int = 0
    max_batch_size: int = 64 * 1024
    compression_type: str | None = None
    # Consumer tuning.
    fetch_max_wait_ms: int = 100
    #: The longest fetch wait of the one consumer of all agent inboxes of a
    #: process, which waits 1.5 ms per partition it consumes (at least
    #: ``fetch_max_wait_ms``): each idle fetch costs Python work per partition.
    inbox_fetch_max_wait_ms: int = 5_000
    #: The fetch wait of subscriptions that keep no progress (``durable=False``: a
    #: node's reply topic, the agent registry, live views): always running and
    #: mostly idle, they would otherwise cost an idle process a fetch each
    #: ``fetch_max_wait_ms``. A fetch returns as soon as a record arrives.
    nondurable_fetch_max_wait_ms: int = 500
    max_poll_records: int = 500
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 1_000
    #: Pause between two commits of one subscription (commits coalesce meanwhile).
    commit_interval_ms: int = 20
    #: How often pattern subscriptions look for new topics.
    metadata_max_age_ms: int = 5_000
    request_timeout_ms: int = 30_000
    # Security, passed through to aiokafka.
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str = "PLAIN"
    sasl_plain_username: str | None = None
    sasl_plain_password: str | None = field(default=None, repr=False)
    sasl_kerberos_service_name: str = "kafka"
    sasl_kerberos_domain_name: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    #: A ready SSL context wins over the ``ssl_*`` file settings.
    ssl_context: ssl.SSLContext | None = field(default=None, repr=False, compare=False)
    #: An ``aiokafka.abc.AbstractTokenProvider`` for SASL OAUTHBEARER.
    sasl_oauth_token_provider: Any = field(default=None, repr=False, compare=False)

    def __post_init__(self) -> None:
        problem = bootstrap_problem(self.bootstrap_servers)
        if problem is not None:
            raise ValueError(problem)
        # Code may give 0 wherever it means "at once" (a test's deadline already
        # passed); the environment, where 0 is rather a mistake, is held to more
        # (see _read). A negative or NaN number means nothing anywhere.
        for f in fields(self):
            value = getattr(self, f.name)
            kind = str(f.type)
            if f.name in _CHOICES:
                options = _CHOICES[f.name]
                if value not in options and not (value is None and "None" in kind):
                    allowed = ", ".join(repr(option) for option in options)
                    raise ValueError(f"{f.name} must be one of {allowed}, not {value!r}")
            elif kind.startswith("int") and value is not None:
                if type(value) is not int or value < 0:
                    raise ValueError(f"{f.name} must be a whole number >= 0, not {value!r}")
            elif kind.startswith("float") and not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{f.name} must be a number of seconds >= 0, not {value!r}")

    @property
    def exactly_once(self) -> bool:
        return self.delivery == "exactly_once"

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, prefix: str = ENV_PREFIX, **overrides: Any
    ) -> KafkaSettings:
        """Read settings from ``A2A_KAFKA_<FIELD>`` variables (upper case).

        ``KAFKA_BOOTSTRAP_SERVERS`` is accepted as a fallback for the bootstrap
        servers, ``A2A_DELIVERY`` for the delivery mode. Explicit ``overrides`` win
        over the environment.
        """
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        if env.get(DELIVERY_ENV, "").strip():
            values["delivery"] = choice(env, DELIVERY_ENV, DELIVERY_MODES, "at_least_once")
        for f in fields(cls):
            name = prefix + f.name.upper()
            if name not in env or f.name in ("ssl_context", "sasl_oauth_token_provider"):
                continue
            values[f.name] = _read(env, name, f.name, str(f.type))
        if values.get("bootstrap_servers", _UNSET) is _UNSET:
            values["bootstrap_servers"] = _bootstrap(env, "KAFKA_BOOTSTRAP_SERVERS")
        values = {key: value for key, value in values.items() if value is not _UNSET}
        values.update(overrides)
        return cls(**values)

    def fetch_wait_ms(self, durable: bool) -> int:
        """The fetch wait of a subscription's consumer (the inbox consumer's is
        :func:`~a2a_bus.transport.kafka.inboxes.idle_fetch_wait`)."""
        return self.fetch_max_wait_ms if durable else self.nondurable_fetch_max_wait_ms

    def client_kwargs(self) -> dict[str, Any]:
        """Connection and security options shared by producer, consumer and admin."""
        kwargs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers,
            "request_timeout_ms": self.request_timeout_ms,
            "security_protocol": self.security_protocol,
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_plain_username,
            "sasl_plain_password": self.sasl_plain_password,
            "sasl_kerberos_service_name": self.sasl_kerberos_service_name,
            "sasl_kerberos_domain_name": self.sasl_kerberos_domain_name,
            "sasl_oauth_token_provider": self.sasl_oauth_token_provider,
        }
        if self.client_id is not None:
            kwargs["client_id"] = self.client_id
        context = self.build_ssl_context()
        if context is not None:
            kwargs["ssl_context"] = context
        return kwargs

    def build_ssl_context(self) -> ssl.SSLContext | None:
        """The SSL context for ``SSL``/``SASL_SSL``, or None for plaintext."""
        if self.ssl_context is not None:
            return self.ssl_context
        if self.security_protocol not in ("SSL", "SASL_SSL"):
            return None
        context = create_ssl_context(
            cafile=self.ssl_cafile,
            certfile=self.ssl_certfile,
            keyfile=self.ssl_keyfile,
            password=self.ssl_password,
        )
        context.check_hostname = self.ssl_check_hostname
        return context


#: A variable set to nothing: the setting keeps its default.
_UNSET: Any = object()


def _read(env: Mapping[str, str], name: str, setting: str, kind: str) -> Any:
    """The value of the variable ``name`` for ``setting`` (of type ``kind``);
    EnvError naming the variable when it cannot be used."""
    raw = env[name]
    optional = "None" in kind
    if setting == "bootstrap_servers":
        return _bootstrap(env, name)
    if setting in _CHOICES:
        if optional and not raw.strip():
            return None
        return choice(env, name, _CHOICES[setting], _UNSET)
    if kind.startswith("int"):
        number = whole(env, name, 0 if setting in _MAY_BE_ZERO else 1)
        if number is None:
            return None if optional else _UNSET
        return number
    if kind.startswith("float"):
        value = seconds(env, name, zero=setting in _SECONDS_MAY_BE_ZERO)
        return _UNSET if value is None else value
    if kind.startswith("bool"):
        flag = switch(env, name)
        return _UNSET if flag is None else flag
    if optional and raw == "":
        return None
    return raw


def _bootstrap(env: Mapping[str, str], name: str) -> Any:
    """The bootstrap servers the variable ``name`` holds (unset when empty: it names
    no broker); EnvError naming the variable when aiokafka cannot use them."""
    raw = env.get(name, "")
    if not raw.strip():
        return _UNSET
    problem = bootstrap_problem(raw, name)
    if problem is not None:
        raise EnvError(problem)
    return raw
