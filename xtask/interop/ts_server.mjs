// The TypeScript SDK v2 peer for `cargo xtask interop` (@modelcontextprotocol/server 2.4,
// createMcpHandler: 2026-07-28 plus its stateless fallback for 2025 traffic).
//
//   node ts_server.mjs http PORT   # Streamable HTTP on 127.0.0.1:PORT (any path)
//   node ts_server.mjs stdio
//
// `seen` answers with the headers the server saw, so a check asserts on what arrived.
import http from 'node:http';
import { Readable } from 'node:stream';
import * as z from 'zod';
import { McpServer, createMcpHandler } from '@modelcontextprotocol/server';

const region = () => z.string().meta({ 'x-mcp-header': 'Region' });

function factory() {
  const s = new McpServer({ name: 'ts-v2-peer', version: '2.4.0' });
  s.registerTool('add', { inputSchema: z.object({ a: z.number().int(), b: z.number().int() }) },
    async ({ a, b }) => ({ content: [{ type: 'text', text: String(a + b) }] }));
  s.registerTool('where', { inputSchema: z.object({ region: region() }) },
    async ({ region }) => ({ content: [{ type: 'text', text: `region=${region}` }] }));
  s.registerTool('seen', { inputSchema: z.object({ region: region() }) }, async ({ region }, ctx) => {
    const h = ctx.http?.req?.headers;
    const pick = (k) => (h ? h.get(k) : null);
    const headers = Object.fromEntries(
      ['mcp-method', 'mcp-name', 'mcp-param-region', 'mcp-protocol-version', 'mcp-session-id'].map((k) => [k, pick(k)]));
    return { content: [{ type: 'text', text: JSON.stringify({ region, server: 'ts-v2-peer', headers }) }] };
  });
  return s;
}

if (process.argv[2] === 'stdio') {
  const { serveStdio } = await import('@modelcontextprotocol/server/stdio');
  await serveStdio(factory);
} else {
  const handler = createMcpHandler(factory);
  http.createServer(async (req, res) => {
    const body = ['GET', 'HEAD'].includes(req.method) ? undefined : Readable.toWeb(req);
    const r = await handler.fetch(new Request(`http://${req.headers.host}${req.url}`,
      { method: req.method, headers: req.headers, body, duplex: 'half' }));
    res.writeHead(r.status, Object.fromEntries(r.headers));
    if (r.body) Readable.fromWeb(r.body).pipe(res); else res.end();
  }).listen(Number(process.argv[3] ?? 8102), '127.0.0.1');
}
