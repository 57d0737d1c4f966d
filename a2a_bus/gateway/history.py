"""``GET /topics/{subject}/history``: pages of the events a pub/sub subject retains.

Query: ``limit`` (1..1000, default 100), ``cursor`` (from the previous page),
``newest`` (``true``: the last ``limit`` events). The answer is
``{"events": [structured CloudEvents], "cursor": "...", "undecodable": n}``;
an empty ``events`` means nothing more is retained yet. Reading joins no
consumer group, so it changes no subscriber's progress.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from a2a_bus.gateway.context import context, require_access, topic_refusal
from a2a_bus.gateway.responses import JSONResponse, problem
from a2a_bus.protocol import to_structured, whole_number

DEFAULT_LIMIT = 100
_FLAGS = {"true": True, "1": True, "false": False, "0": False}


async def history(request: Request) -> Response:
    ctx = context(request)
    access = require_access(request)
    subject = request.path_params["subject"]
    refused = topic_refusal(access, subject)
    if refused is not None:
        return refused
    query = request.query_params
    raw_limit = query.get("limit", str(DEFAULT_LIMIT))
    limit = whole_number(raw_limit, 4)
    if limit is None:
        return problem(400, f"limit must be an integer from 1 to 1000, not {raw_limit[:20]!r}")
    newest = _FLAGS.get(query.get("newest", "false").lower())
    if newest is None:
        return problem(400, "newest must be true or false")
    try:
        page = await ctx.client.read(
            subject, limit=limit, cursor=query.get("cursor") or None, newest=newest
        )
    except ValueError as exc:  # subject, limit, cursor (RoutingError is one)
        return problem(400, str(exc))
    except TimeoutError as exc:
        return problem(504, str(exc))
    return JSONResponse(
        {
            "events": [to_structured(event) for event in page.events],
            "cursor": page.cursor,
            "undecodable": page.undecodable,
        }
    )
