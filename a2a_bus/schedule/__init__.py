"""Scheduled triggers: schedules (an interval or a cron expression) that publish an
event on a subject or call an agent's method; on Kafka each tick fires once across
all processes and survives restarts (see :mod:`a2a_bus.schedule.ticks`)."""

from a2a_bus.schedule.scheduler import Scheduler
from a2a_bus.schedule.spec import Schedule, ScheduleError

__all__ = ["Schedule", "ScheduleError", "Scheduler"]
