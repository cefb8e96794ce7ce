"""The Python SDK's client answering elicitation, for `cargo xtask interop`: clients at once on
URL in MODE (`auto` or `legacy`), each answering a form with its own name (NAMES, comma-separated;
Ada and Grace by default),
each calling TOOL (the reference server's `ask_client`, through the gateway). Prints one JSON
document: each client's name, the result text, and the messages its callback was asked."""

import asyncio
import json
import sys

import mcp.types as types
from mcp import Client


async def one(url: str, mode: str, tool: str, name: str) -> dict:
    asked = []

    async def answer(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"name": name})

    async with Client(url, mode=mode, elicitation_callback=answer) as client:
        result = await client.call_tool(tool, {"what": "name"})
        text = result.content[0].text if result.content else ""
        return {"name": name, "text": text, "asked": asked, "version": client.protocol_version}


async def main(url: str, mode: str, tool: str, names: str = "Ada,Grace") -> None:
    clients = await asyncio.gather(*(one(url, mode, tool, name) for name in names.split(",")))
    print(json.dumps({"clients": list(clients)}))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
