"""Bus counters and the process-wide Prometheus metrics they feed."""

from __future__ import annotations

import gc

from prometheus_client import REGISTRY, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from a2a_bus.core.metrics import PROMETHEUS_COUNTERS, Metrics


def _sample(name: str) -> float:
    value = REGISTRY.get_sample_value(name)
    assert value is not None, name
    return value


def test_prometheus_totals_add_up_buses_and_never_go_down() -> None:
    requests_before = _sample("a2a_requests_total")
    in_flight_before = _sample("a2a_in_flight")
    first, second = Metrics(), Metrics()
    first.requests += 3
    second.requests += 1
    second.in_flight += 2
    assert (first.requests, second.requests, second.in_flight) == (3, 1, 2)
    assert _sample("a2a_requests_total") - requests_before == 4
    assert _sample("a2a_in_flight") - in_flight_before == 2
    owner: dict[str, object] = {"metrics": second}
    owner["self"] = owner  # held in a cycle, like a bus's: freed by the cycle collector
    del second, owner
    gc.collect()
    # A bus that is gone keeps its counts; its in-flight gauge goes with it.
    assert _sample("a2a_requests_total") - requests_before == 4
    assert _sample("a2a_in_flight") == in_flight_before


def test_the_exposition_parses_with_help_and_type_and_counters_end_in_total() -> None:
    Metrics()  # at least one live bus
    text = generate_latest(REGISTRY).decode()
    families = {family.name: family for family in text_string_to_metric_families(text)}
    for metric, documentation in PROMETHEUS_COUNTERS.values():
        family = families[metric]
        assert (family.type, family.documentation) == ("counter", documentation)
        assert [sample.name for sample in family.samples] == [f"{metric}_total"]
    assert families["a2a_in_flight"].type == "gauge"
    assert f"# HELP a2a_in_flight {families['a2a_in_flight'].documentation}" in text
