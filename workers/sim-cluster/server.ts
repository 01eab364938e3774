/**
 * The SIMULATED cluster: one HTTP server speaking the vLLM subset (under /v1,
 * plus /health) and the Tinker REST subset (under /api/v1) over a sim policy.
 * Nothing here has a GPU or model weights; everything it logs says so.
 * With `latency`, answers take SIMULATED GPU time (latency.ts), reported
 * under /sim/latency.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import type { SimWorld } from '../../core/envs/sim/world';
import { SimClusterStore } from './checkpoints';
import { SimInferenceServer } from './inference-server';
import { SimTrainerServer } from './trainer-server';
import type { SimApi, SimHttpReply } from './http';
import { LatencyModel, type SimLatencyOptions } from './latency';

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
  /** SIMULATED GPU time from a latency profile (latency.ts); off (CPU speed) when absent. */
  latency?: SimLatencyOptions;
}

export interface SimCluster {
  url: string;
  port: number;
  /** Its on-disk state (training models, futures, checkpoints): for tools and tests that inspect it or make a write fail. */
  store: SimClusterStore;
  /** The latency model when one is on: its report and reset, in-process (GET /sim/latency over HTTP). */
  latency?: LatencyModel;
  /** Stops accepting requests, finishes queued training ops (so their state is on disk), then closes. */
  close(): Promise<void>;
}

export async function startSimCluster(options: SimClusterOptions): Promise<SimCluster> {
  const { world, dataDir, host = '127.0.0.1', port = 0 } = options;
  const logger = simulatedLogger(options.logger ?? pino({ level: 'info' }, pino.destination(2)));
  // First: an unknown profile fails before anything is opened.
  const latency = options.latency ? LatencyModel.fromOptions(options.latency) : undefined;
  const store = await SimClusterStore.open(dataDir);
  const inference = await SimInferenceServer.open({ world, store, logger, latency });
  const trainer = await SimTrainerServer.open({
    world, store, logger, latency,
    opDelayMs: options.trainerOpDelayMs ?? 0,
    longPollMs: options.trainerLongPollMs,
    sessionTimeoutMs: options.trainerSessionTimeoutMs,
  });

  const server = createServer((req, res) => {
    void serve(req, res, { inference, trainer, latency, logger });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  logger.info({ url, dataDir: store.dataDir, world: world.name, model: world.model.name }, `[SIMULATED] sim cluster listening on ${url}`);
  if (latency) {
    logger.info(
      { latencyProfile: latency.profileName, speedup: latency.speedup },
      `[SIMULATED] latency model '${latency.profileName}' on at speedup ${latency.speedup}: answers take SIMULATED GPU time (report: GET ${url}/sim/latency)`,
    );
  }

  return {
    url,
    port: address.port,
    store,
    latency,
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
  latency?: LatencyModel;
  logger: Logger;
}

async function serve(req: IncomingMessage, res: ServerResponse, { inference, trainer, latency, logger }: Apis): Promise<void> {
  const started = Date.now();
  const path = new URL(req.url ?? '/', 'http://sim').pathname;
  const api = path.startsWith('/api/') ? trainer : path.startsWith('/v1/') || path === '/health' ? inference : undefined;
  let reply: SimHttpReply;
  try {
    if (path.startsWith('/sim/')) {
      req.resume(); // a body, if any, is not read
      reply = latencyRoute(req.method ?? 'GET', path, latency);
    } else if (!api) {
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

/** GET /sim/latency: the SIMULATED accounting; POST /sim/latency/reset zeroes it and restarts the simulated clock. */
function latencyRoute(method: string, path: string, latency: LatencyModel | undefined): SimHttpReply {
  const route = `${method} ${path}`;
  if (route !== 'GET /sim/latency' && route !== 'POST /sim/latency/reset') {
    return path === '/sim/latency' || path === '/sim/latency/reset' ? { status: 405, json: { detail: 'Method Not Allowed' } } : { status: 404, json: { detail: 'Not Found' } };
  }
  if (!latency) return { status: 200, json: { simulated: true, enabled: false } };
  if (route === 'POST /sim/latency/reset') latency.reset();
  return { status: 200, json: latency.report() };
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
