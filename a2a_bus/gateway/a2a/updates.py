"""What a task's subscribers are sent: its updates, each numbered with its version.

A :class:`~a2a_bus.gateway.a2a.fold.TaskFold` makes them from the task log's
entries; the endpoint streams them (SSE ``id`` is the version) and push
notifications send the status changes.
"""

from __future__ import annotations

from dataclasses import dataclass

from a2a_bus.gateway.a2a.model import Artifact, Task


@dataclass(frozen=True)
class StatusChanged:
    #: The task as it was when its status changed.
    snapshot: Task


@dataclass(frozen=True)
class ArtifactChunk:
    #: The parts that arrived, under the artifact's id.
    artifact: Artifact
    append: bool
    last_chunk: bool


Update = StatusChanged | ArtifactChunk


@dataclass(frozen=True)
class Versioned:
    version: int
    update: Update
