"""Runs an agent that mounts one stdio MCP server, once, in a process of its own, so
that a test can bound with a timeout what no signal interrupts (a regular expression
backtracking in C holds the interpreter): ``run_once.py BASE_URL COMMAND [ARG...]``,
the model being the OpenAI-compatible server at ``BASE_URL``, the server mounted as ``raw``.
"""

from __future__ import annotations

import sys

from a2a_bus.llm import AgentBuilder, OpenAIClient
from a2a_bus.llm.mcp_servers import McpServer


def main() -> None:
    base_url, command, *args = sys.argv[1:]
    model = OpenAIClient("scripted-model", base_url=base_url, api_key="test-key", timeout=10.0)
    server = McpServer.stdio("raw", command, *args)
    loop = AgentBuilder("a").llm(model).mcp_server(server).build()
    with loop.mcp_session() as agent:
        print(agent.run("Go").content)


if __name__ == "__main__":
    main()
