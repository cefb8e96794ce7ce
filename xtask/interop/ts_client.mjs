// The TypeScript SDK's client (v1), for `cargo xtask interop`: connects to URL over Streamable
// HTTP, lists the tools, calls TOOL with ARGS (a JSON object), and prints one JSON document:
// the tool names and the result.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";

const [url, tool, args] = process.argv.slice(2);
const client = new Client({ name: "toolwire-interop", version: "0" });
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
const listed = await client.listTools();
const result = await client.callTool({ name: tool, arguments: JSON.parse(args) });
console.log(JSON.stringify({
  server: client.getServerVersion(),
  tools: listed.tools.map((t) => t.name),
  result,
}));
await client.close();
