"""The Python `mcp` 2.3 peer for `cargo xtask interop` (MCPServer, not written by Toolwire's team
beyond these few tools).

    python py_server.py http PORT [json]   # Streamable HTTP on 127.0.0.1:PORT/mcp, both eras
    python py_server.py sse PORT           # the 2024-11-05 HTTP+SSE transport on 127.0.0.1:PORT/sse
    python py_server.py stdio              # newline-delimited JSON-RPC on stdin/stdout

`seen` answers with the HTTP headers and protocol version the server saw, so a check can assert
on what arrived rather than on an exit code; `log` sends a log message at four levels;
`ask_client` asks the client its name with `ctx.elicit`.
"""
import sys
from typing import Annotated

from pydantic import BaseModel, Field
from mcp.server.mcpserver import Context, MCPServer

app = MCPServer("py-peer")

REGION = Field(json_schema_extra={"x-mcp-header": "Region"})


@app.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@app.tool()
def where(region: Annotated[str, REGION], q: str = "") -> str:
    """Echo the region (mirrored to Mcp-Param-Region)."""
    return f"region={region} q={q}"


@app.tool()
async def log(message: str, ctx: Context) -> str:
    """Send one log message at each of debug, info, warning and error (the server drops those
    below the level a 2026-07-28 request asks for)."""
    for level in ("debug", "info", "warning", "error"):
        await ctx.log(level, f"{level}: {message}")
    return "logged"


class Name(BaseModel):
    name: str


@app.tool()
async def ask_client(ctx: Context, what: str = "name") -> str:
    """Ask the client its name with `ctx.elicit` (which this SDK does only in the legacy era:
    over 2026-07-28 it has no back-channel for a request of its own)."""
    answer = await ctx.elicit(message="What is your name?", schema=Name)
    if answer.action != "accept":
        return f"no name ({answer.action})"
    return f"Hello, {answer.data.name}!"


@app.tool()
def seen(region: Annotated[str, REGION], ctx: Context) -> dict:
    """What this server saw: the argument, the SEP-2243 headers and the protocol version."""
    headers = ctx.headers or {}
    wanted = ("mcp-method", "mcp-name", "mcp-param-region", "mcp-protocol-version", "mcp-session-id")
    return {
        "region": region,
        "server": "py-peer",
        "protocol": ctx.protocol_version,
        "headers": {k: headers.get(k) for k in wanted},
    }


if __name__ == "__main__":
    if sys.argv[1:2] == ["sse"]:
        app.run(transport="sse", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["http"]:
        app.run(
            transport="streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            json_response=sys.argv[3:4] == ["json"],
        )
    else:
        app.run()
