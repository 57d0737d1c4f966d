"""The A2A protocol's JSON-RPC binding, so stock A2A clients reach any bus agent.

Each agent X gets ``POST /a2a/X`` (``SendMessage``, ``SendStreamingMessage``,
``GetTask``, ``ListTasks``, ``CancelTask``, ``SubscribeToTask``, and the 0.3 names
``message/send``, ``message/stream``, ``tasks/get``, ``tasks/cancel``,
``tasks/resubscribe``) and its agent card at
``GET /a2a/X/.well-known/agent-card.json``, built from its discovery card. Tasks
are records on the bus (the task log), so any gateway replica serves any task.
"""

from a2a_bus.gateway.a2a.endpoint import A2ABinding
from a2a_bus.gateway.a2a.view import TaskView
from a2a_bus.gateway.settings import DEFAULT_MAX_TASKS, DEFAULT_MAX_TASKS_PER_OWNER

__all__ = ["DEFAULT_MAX_TASKS", "DEFAULT_MAX_TASKS_PER_OWNER", "A2ABinding", "TaskView"]
