"""The Python SDK's client, for `cargo xtask interop`: connects to URL in MODE (`auto` or
`legacy`), lists the tools, calls TOOL with ARGS (a JSON object), and prints one JSON document:
the protocol version, the tool names and the result."""

import asyncio
import json
import sys

from mcp import Client


async def main(url: str, mode: str, tool: str, arguments: str) -> None:
    async with Client(url, mode=mode) as client:
        listed = await client.list_tools()
        result = await client.call_tool(tool, json.loads(arguments))
        print(
            json.dumps(
                {
                    "version": client.protocol_version,
                    "tools": [t.name for t in listed.tools],
                    "result": result.model_dump(mode="json", by_alias=True, exclude_none=True),
                }
            )
        )


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
