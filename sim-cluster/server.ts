/**
 * The SIMULATED cluster: one HTTP server speaking the vLLM subset (under /v1,
 * plus /health) and the Tinker REST subset (under /api/v1) over a sim policy.
 * Nothing here has a GPU or model weights; everything it logs says so.
 * With `serve`, a process serves one part only (one inference replica, or the
 * trainer) and refuses the other part's requests with a 404 saying so.
 * With `latency`, answers take SIMULATED GPU time (latency.ts), reported
 * under /sim/latency; /sim/requests counts the inference answers (request-counts.ts).
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import pino, { type Logger } from 'pino';
import type { SimWorld } from '../core/envs/sim/world';
import { SimClusterStore } from './checkpoints';
import { SimTrainerServer } from './trainer-server';
import type { SimApi, SimHttpReply } from './http';
import { SimInferenceServer, vllmError } from './inference-server';
import { LatencyModel, type SimLatencyOptions } from './latency';
import { type SimClusterServes, SimRequestCounts } from './request-counts';

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
  /** The APIs this process serves (default 'all'): 'inference' is /v1 and /health only, 'trainer' /api/v1 only; /sim/* always. */
  serve?: SimClusterServes;
  /**
   * Load again at start the LoRA adapters loaded before a restart (recorded in
   * the data directory). Off by default: a restarted vLLM forgets the adapters
   * it loaded at runtime, and so does the sim.
   */
  keepAdapters?: boolean;
}

export interface SimCluster {
  url: string;
  port: number;
  /** Its on-disk state (training models, futures, checkpoints): for tools and tests that inspect it or make a write fail. */
  store: SimClusterStore;
  /** The latency model when one is on: its report and reset, in-process (GET /sim/latency over HTTP). */
  latency?: LatencyModel;
  /** The APIs it serves. */
  serves: SimClusterServes;
  /** Its inference answers counted, in-process (GET /sim/requests over HTTP). */
  requests: SimRequestCounts;
  /** Stops accepting requests, finishes queued training ops (so their state is on disk), then closes. */
  close(): Promise<void>;
}

export async function startSimCluster(options: SimClusterOptions): Promise<SimCluster> {
  const { world, dataDir, host = '127.0.0.1', port = 0, serve: serves = 'all' } = options;
  const logger = simulatedLogger(options.logger ?? pino({ level: 'info' }, pino.destination(2)));
  // First: an unknown profile fails before anything is opened.
  const latency = options.latency ? LatencyModel.fromOptions(options.latency) : undefined;
  const store = await SimClusterStore.open(dataDir);
  const inference =
    serves === 'trainer'
      ? undefined
      : await SimInferenceServer.open({ world, store, logger, latency, keepAdapters: options.keepAdapters ?? false });
  const trainer =
    serves === 'inference'
      ? undefined
      : await SimTrainerServer.open({
          world,
          store,
          logger,
          latency,
          opDelayMs: options.trainerOpDelayMs ?? 0,
          longPollMs: options.trainerLongPollMs,
          sessionTimeoutMs: options.trainerSessionTimeoutMs,
        });
  const requests = new SimRequestCounts(serves);

  const server = createServer((req, res) => {
    void serve(req, res, { serves, inference, trainer, latency, requests, logger });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  const address = server.address() as AddressInfo;
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`;
  logger.info(
    { url, serves, dataDir: store.dataDir, world: world.name, model: world.model.name },
    `[SIMULATED] sim cluster listening on ${url}, serving ${SERVES_DESCRIPTION[serves]}`,
  );
  if (latency) {
    logger.info(
      { latencyProfile: latency.profileName, speedup: latency.speedup, servers: latency.profile.inference.servers },
      `[SIMULATED] latency model '${latency.profileName}' on at speedup ${latency.speedup} over ${latency.profile.inference.servers} inference replica(s): answers take SIMULATED GPU time (report: GET ${url}/sim/latency)`,
    );
  }

  return {
    url,
    port: address.port,
    store,
    latency,
    serves,
    requests,
    close: async () => {
      const closed = new Promise<void>((resolve, reject) => server.close((err) => (err ? reject(err) : resolve())));
      server.closeIdleConnections();
      await trainer?.drain();
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

/** How the start log says what a process serves. */
const SERVES_DESCRIPTION: Record<SimClusterServes, string> = {
  all: 'inference (/v1, /health) and the trainer (/api/v1)',
  inference: 'inference only (/v1, /health)',
  trainer: 'the trainer only (/api/v1)',
};

interface Apis {
  serves: SimClusterServes;
  /** Absent when this process serves only the trainer. */
  inference?: SimApi;
  /** Absent when this process serves only inference. */
  trainer?: SimApi;
  latency?: LatencyModel;
  requests: SimRequestCounts;
  logger: Logger;
}

async function serve(
  req: IncomingMessage,
  res: ServerResponse,
  { serves, inference, trainer, latency, requests, logger }: Apis,
): Promise<void> {
  const started = Date.now();
  const method = req.method ?? 'GET';
  const path = new URL(req.url ?? '/', 'http://sim').pathname;
  const part = path.startsWith('/api/') ? 'trainer' : path.startsWith('/v1/') || path === '/health' ? 'inference' : undefined;
  const api = part === 'trainer' ? trainer : part === 'inference' ? inference : undefined;
  let reply: SimHttpReply;
  let answered: ((status: number) => void) | undefined;
  try {
    if (path.startsWith('/sim/')) {
      req.resume(); // a body, if any, is not read
      reply = simRoute(method, path, latency, requests);
    } else if (part && !api) {
      req.resume();
      reply = notServedHere(part, serves);
      requests.refused(reply.status);
    } else if (!api) {
      reply = { status: 404, json: { detail: 'Not Found' } };
    } else {
      const body = await readBody(req);
      if (part === 'inference') answered = requests.begin(method, path, body.ok ? body.value : undefined);
      reply = body.ok
        ? await api.handle({ method, path, headers: req.headers, body: body.value, raw: body.raw, contentType: body.contentType })
        : api.badRequest(body.message);
    }
  } catch (err) {
    logger.error({ err, path }, '[SIMULATED] request failed');
    reply = { status: 500, json: { detail: `sim cluster internal error: ${(err as Error).message}` } };
  }
  answered?.(reply.status);
  send(res, reply);
  logger.debug({ method, path, status: reply.status, ms: Date.now() - started }, 'request');
}

/** A request for the part this process does not serve: a 404 in that part's protocol (vLLM's error shape, or Tinker's `{detail}`), saying where it goes. */
function notServedHere(part: 'inference' | 'trainer', serves: SimClusterServes): SimHttpReply {
  const message =
    part === 'inference'
      ? `[SIMULATED] this sim cluster process serves only training (--serve ${serves}): the inference API (/v1, /health) is not served here; send it to a sim cluster started with --serve inference or all`
      : `[SIMULATED] this sim cluster process serves only inference (--serve ${serves}): the trainer API (/api/v1) is not served here; send it to a sim cluster started with --serve trainer or all`;
  return part === 'inference' ? vllmError(404, 'NotFoundError', message) : { status: 404, json: { detail: message } };
}

/**
 * The sim's own routes, whatever the process serves: GET /sim/latency (the
 * SIMULATED accounting; POST /sim/latency/reset zeroes it and restarts the
 * simulated clock) and GET /sim/requests (POST /sim/requests/reset zeroes it).
 */
function simRoute(method: string, path: string, latency: LatencyModel | undefined, requests: SimRequestCounts): SimHttpReply {
  if (path === '/sim/requests' || path === '/sim/requests/reset') {
    const route = `${method} ${path}`;
    if (route !== 'GET /sim/requests' && route !== 'POST /sim/requests/reset')
      return { status: 405, json: { detail: 'Method Not Allowed' } };
    if (route === 'POST /sim/requests/reset') requests.reset();
    return { status: 200, json: requests.report() };
  }
  return latencyRoute(method, path, latency);
}

/** GET /sim/latency: the SIMULATED accounting; POST /sim/latency/reset zeroes it and restarts the simulated clock. */
function latencyRoute(method: string, path: string, latency: LatencyModel | undefined): SimHttpReply {
  const route = `${method} ${path}`;
  if (route !== 'GET /sim/latency' && route !== 'POST /sim/latency/reset') {
    return path === '/sim/latency' || path === '/sim/latency/reset'
      ? { status: 405, json: { detail: 'Method Not Allowed' } }
      : { status: 404, json: { detail: 'Not Found' } };
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
