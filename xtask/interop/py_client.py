"""The Python SDK's client, for `cargo xtask interop`: connects to URL in MODE (`auto` or
`legacy`), lists the tools, calls TOOL with ARGS (a JSON object), and prints one JSON document:
the protocol version, the tool names and the result. With a fifth argument N it calls the tool
N times, 100 ms apart, in one session, and prints each call's text or error instead; if the
session itself fails, the calls made so far and that failure (its innermost exceptions, each with
the file and line that raised it)."""

import asyncio
import json
import sys
import traceback

from mcp import Client


def leaves(error: BaseException) -> list[str]:
    """The innermost exceptions of a (possibly grouped) failure, each with the SDK's line that
    raised it (or the innermost line, when none is the SDK's)."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in leaves(inner)]
    frames = traceback.extract_tb(error.__traceback__)
    sdk = [f for f in frames if "/mcp/" in f.filename] or frames
    where = f" at {sdk[-1].filename}:{sdk[-1].lineno} ({sdk[-1].line})" if sdk else ""
    return [f"{type(error).__module__}.{type(error).__qualname__}: {error}{where}"]


async def repeat(url: str, mode: str, tool: str, arguments: str, times: int) -> None:
    outcomes = []
    version = None
    try:
        async with Client(url, mode=mode) as client:
            version = client.protocol_version
            for _ in range(times):
                try:
                    result = await client.call_tool(tool, json.loads(arguments))
                    outcomes.append({"text": result.content[0].text})
                except Exception as e:  # noqa: BLE001 - every failure is reported, not raised
                    outcomes.append({"error": str(e)})
                await asyncio.sleep(0.1)
    except Exception as e:  # noqa: BLE001 - the session's own failure is reported too
        print(json.dumps({"version": version, "calls": outcomes, "crash": leaves(e)}))
        return
    print(json.dumps({"version": version, "calls": outcomes}))


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
