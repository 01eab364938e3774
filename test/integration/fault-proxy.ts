/**
 * An HTTP proxy in front of a real server that injects transport faults the
 * server itself may send only under load or after a restart (408, 5xx, 410,
 * a request held for seconds), so a client's handling of them is tested
 * against the real server behind.
 */
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Fault {
  /** Which request it applies to (method and path). */
  match(method: string, path: string): boolean;
  /** An HTTP status to answer instead of forwarding, or a delay (ms) before forwarding. */
  status?: number;
  delayMs?: number;
}

export interface FaultProxy {
  url: string;
  /** Faults still to inject, first match first; each is used once. */
  faults: Fault[];
  /** Requests seen, as "METHOD /path". */
  seen: string[];
  close(): Promise<void>;
}

async function body(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

export interface FaultProxyOptions {
  /** Answer 401 to a request whose `Authorization` is not `Bearer <requireKey>`, as an endpoint with auth does. */
  requireKey?: string;
  /** Listen on this port (0: a free one), e.g. to come back where a client expects it after an outage. */
  port?: number;
}

export async function startFaultProxy(target: string, options: FaultProxyOptions = {}): Promise<FaultProxy> {
  const proxy: FaultProxy = { url: '', faults: [], seen: [], close: async () => undefined };
  const server = createServer((req, res) => {
    void (async () => {
      const path = req.url ?? '/';
      proxy.seen.push(`${req.method} ${path}`);
      const raw = await body(req);
      if (options.requireKey !== undefined && req.headers.authorization !== `Bearer ${options.requireKey}`) {
        res.writeHead(401, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({ error: { message: 'invalid API key', type: 'AuthenticationError', code: 401 }, detail: 'invalid API key' }),
        );
        return;
      }
      const i = proxy.faults.findIndex((f) => f.match(req.method ?? 'GET', path));
      const fault = i >= 0 ? proxy.faults.splice(i, 1)[0] : undefined;
      if (fault?.status) {
        res.writeHead(fault.status, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ detail: `injected by the fault proxy: HTTP ${fault.status}` }));
        return;
      }
      if (fault?.delayMs) await new Promise((resolve) => setTimeout(resolve, fault.delayMs));
      const headers: Record<string, string> = {};
      for (const [k, v] of Object.entries(req.headers))
        if (typeof v === 'string' && !['host', 'content-length', 'connection'].includes(k)) headers[k] = v;
      const upstream = await fetch(`${target}${path}`, {
        method: req.method,
        headers,
        body: raw.length ? raw : undefined,
        redirect: 'manual',
      });
      const out: Record<string, string> = {};
      upstream.headers.forEach((v, k) => {
        if (!['content-length', 'transfer-encoding', 'connection', 'content-encoding'].includes(k)) out[k] = v;
      });
      res.writeHead(upstream.status, out);
      res.end(Buffer.from(await upstream.arrayBuffer()));
    })().catch((err: unknown) => {
      res.writeHead(502);
      res.end(String(err));
    });
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, '127.0.0.1', resolve));
  proxy.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  proxy.close = () =>
    new Promise((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  return proxy;
}
