"""The Python SDK's client, for `cargo xtask interop`: connects to URL in MODE (`auto` or
`legacy`), lists the tools, calls TOOL with ARGS (a JSON object), and prints one JSON document:
the protocol version, the tool names and the result. With a fifth argument N it calls the tool
N times, 100 ms apart, in one session, and prints each call's text or error instead."""

import asyncio
import json
import sys

from mcp import Client


async def repeat(url: str, mode: str, tool: str, arguments: str, times: int) -> None:
    outcomes = []
    async with Client(url, mode=mode) as client:
        for _ in range(times):
            try:
                result = await client.call_tool(tool, json.loads(arguments))
                outcomes.append({"text": result.content[0].text})
            except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                outcomes.append({"error": str(e)})
            await asyncio.sleep(0.1)
        print(json.dumps({"version": client.protocol_version, "calls": outcomes}))


async def main(url: str, mode: str, tool: str, arguments: str, times: str = "") -> None:
    if times:
        await repeat(url, mode, tool, arguments, int(times))
        return
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
    asyncio.run(main(*sys.argv[1:6]))
