"""Writes the broker refused as ``NOT_ENOUGH_REPLICAS`` and aiokafka sent again,
counted during a benchmark instead of logged one by one.

A Kafka broker of 3.6 or later verifies each transactional write with the
transaction coordinator, and to aiokafka it now and then answers
``NOT_ENOUGH_REPLICAS`` (docs/decisions/0010). The producer logs a warning for
each and retries; in ``a2a-bus bench kafka`` the exactly_once path meets it dozens
of times a run. The figures already carry the retries' cost; the report says how
many there were, in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from aiokafka.errors import NotEnoughReplicasError

#: The logger aiokafka's producer warns on before it sends a refused write again.
SENDER_LOGGER = "aiokafka.producer.sender"
#: How that warning starts (its arguments: the partition, then the error).
RETRY_MESSAGE = "Got error produce response"


class RetriedWrites(logging.Filter):
    """Counts the producer's retry warnings for ``NOT_ENOUGH_REPLICAS`` and keeps
    them out of the output; every other record passes."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not (isinstance(record.msg, str) and record.msg.startswith(RETRY_MESSAGE)):
            return True
        args = record.args if isinstance(record.args, tuple) else ()
        error = args[-1] if args else None
        kind = error if isinstance(error, type) else type(error)
        if issubclass(kind, NotEnoughReplicasError):
            self.count += 1
            return False
        return True


@contextmanager
def counting_retried_writes() -> Iterator[RetriedWrites]:
    """While inside, count (and do not log) the producer's ``NOT_ENOUGH_REPLICAS``
    retries."""
    logger = logging.getLogger(SENDER_LOGGER)
    retried = RetriedWrites()
    logger.addFilter(retried)
    try:
        yield retried
    finally:
        logger.removeFilter(retried)
