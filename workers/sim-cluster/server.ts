/**
 * The SIMULATED cluster: one HTTP server speaking the vLLM subset (under /v1,
 * plus /health) and the Tinker REST subset (under /api/v1) over a sim policy.
 * Nothing here has a GPU or model weights; everything it logs says so.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import type { SimWorld } from '../../core/envs/sim/world';
import { SimClusterStore } from './checkpoints';
import { SimInferenceServer } from './inference-server';
import { SimTrainerServer } from './trainer-server';
import type { SimApi, SimHttpReply } from './http';

/** Forward-backward batches of long trajectories are large; anything past this is a client bug. */
const MAX_BODY_BYTES = 256 * 1024 * 1024;

export interface SimClusterOptions {
  world: SimWorld;
  dataDir: string;
  host?: string;
  /** 0 picks a free port. */
  port?: number;
  logger?: Logger;
  /** Simulated training latency per trainer op, so clients really poll futures; 0 completes on the next tick. */
  trainerOpDelayMs?: number;
  /** How long retrieve_future holds a request for a pending op before answering 408 (default 5 s). */
  trainerLongPollMs?: number;
  /** A Tinker session silent this long expires and its models are unloaded (default 300 s, as SkyRL). */
  trainerSessionTimeoutMs?: number;
}

export interface SimCluster {
  url: string;
  port: number;
  /** Its on-disk state (training models, futures, checkpoints): for tools and tests that inspect it or make a write fail. */
  store: SimClusterStore;
  /** Stops accepting requests, finishes queued training ops (so their state is on disk), then closes. */
  close(): Promise<void>;
}

export async function startSimCluster(options: SimClusterOptions): Promise<SimCluster> {
  const { world, dataDir, host = '127.0.0.1', port = 0 } = options;
  const logger = simulatedLogger(options.logger ?? pino({ level: 'info' }, pino.destination(2)));
  const store = await SimClusterStore.open(dataDir);
  const inference = await SimInferenceServer.open({ world, store, logger });
  const trainer = await SimTrainerServer.open({
    world, store, logger,
    opDelayMs: options.trainerOpDelayMs ?? 0,
    longPollMs: options.trainerLongPollMs,
    sessionTimeoutMs: options.trainerSessionTimeoutMs,
  });

  const server = createServer((req, res) => {
    void serve(req, res, { inference, trainer, logger });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  logger.info({ url, dataDir: store.dataDir, world: world.name, model: world.model.name }, `[SIMULATED] sim cluster listening on ${url}`);

  return {
    url,
    port: address.port,
    store,
    close: async () => {
      const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      server.closeIdleConnections();
      await trainer.drain();
      server.closeAllConnections();
      await closed;
      logger.info({ url }, '[SIMULATED] sim cluster stopped');
    },
  };
}

/** Every line the sim cluster logs carries `simulated: true`, whatever logger it was given. */
function simulatedLogger(logger: Logger): Logger {
  const bindings = logger.bindings();
  return logger.child(bindings.simulated === true ? { component: 'sim-cluster' } : { simulated: true, component: 'sim-cluster' });
}

interface Apis {
  inference: SimApi;
  trainer: SimApi;
  logger: Logger;
}

async function serve(req: IncomingMessage, res: ServerResponse, { inference, trainer, logger }: Apis): Promise<void> {
  const started = Date.now();
  const path = new URL(req.url ?? '/', 'http://sim').pathname;
  const api = path.startsWith('/api/') ? trainer : path.startsWith('/v1/') || path === '/health' ? inference : undefined;
  let reply: SimHttpReply;
  try {
    if (!api) {
      reply = { status: 404, json: { detail: 'Not Found' } };
    } else {
      const body = await readBody(req);
      reply = body.ok
        ? await api.handle({ method: req.method ?? 'GET', path, headers: req.headers, body: body.value, raw: body.raw, contentType: body.contentType })
        : api.badRequest(body.message);
    }
  } catch (err) {
    logger.error({ err, path }, '[SIMULATED] request failed');
    reply = { status: 500, json: { detail: `sim cluster internal error: ${(err as Error).message}` } };
  }
  send(res, reply);
  logger.debug({ method: req.method, path, status: reply.status, ms: Date.now() - started }, 'request');
}

type BodyResult = { ok: true; value: unknown; raw: Buffer; contentType: string } | { ok: false; message: string };

/** Reads the body; a JSON (or untyped) body is parsed, any other media type is left to the route as bytes. */
async function readBody(req: IncomingMessage): Promise<BodyResult> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY_BYTES) return { ok: false, message: `request body is larger than ${MAX_BODY_BYTES} bytes` };
    chunks.push(chunk as Buffer);
  }
  const raw = Buffer.concat(chunks);
  const contentType = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
  if (contentType !== '' && contentType !== 'application/json') return { ok: true, value: undefined, raw, contentType };
  const text = raw.toString('utf8');
  if (text.trim() === '') return { ok: true, value: undefined, raw, contentType };
  try {
    return { ok: true, value: JSON.parse(text), raw, contentType };
  } catch (err) {
    return { ok: false, message: `request body is not valid JSON: ${(err as Error).message}` };
  }
}

function send(res: ServerResponse, reply: SimHttpReply): void {
  const headers = reply.headers ?? {};
  if (reply.bytes !== undefined) {
    res.writeHead(reply.status, { 'content-type': reply.contentType ?? 'application/octet-stream', ...headers });
    res.end(reply.bytes);
  } else if (reply.text !== undefined) {
    res.writeHead(reply.status, { 'content-type': 'text/plain; charset=utf-8', ...headers });
    res.end(reply.text);
  } else if (reply.json !== undefined) {
    res.writeHead(reply.status, { 'content-type': 'application/json', ...headers });
    res.end(JSON.stringify(reply.json));
  } else {
    res.writeHead(reply.status, headers);
    res.end();
  }
}
