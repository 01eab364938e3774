/**
 * A worker process's `/metrics` on $HARNESS_S_METRICS_PORT (default 9464):
 * the project's `harness_s_*` metrics (core/metrics.ts) followed by the
 * Temporal SDK's runtime metrics (`temporal_*`). The SDK's Prometheus
 * exporter serves on a loopback port of its own, chosen here; each scrape
 * reads it there and appends it, so Prometheus scrapes one port per process.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { UserError } from '../core/errors';
import { metricsRegistry } from '../core/metrics';

export const METRICS_PORT_VARIABLE = 'HARNESS_S_METRICS_PORT';
export const DEFAULT_METRICS_PORT = 9464;
/** How long a scrape waits for the SDK's exporter before serving without its metrics. */
const TEMPORAL_SCRAPE_TIMEOUT_MS = 2_000;

/** A port that is not one, or is taken: the user picks another. */
export class MetricsConfigError extends UserError {
  override name = 'MetricsConfigError';
}

/** The port from $HARNESS_S_METRICS_PORT: the default when unset, null when `off` or `0` (no metrics served). */
export function metricsPortFromEnv(env: NodeJS.ProcessEnv = process.env): number | null {
  const raw = (env[METRICS_PORT_VARIABLE] ?? '').trim();
  if (raw === '') return DEFAULT_METRICS_PORT;
  if (raw.toLowerCase() === 'off' || raw === '0') return null;
  const port = Number(raw);
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new MetricsConfigError(
      `${METRICS_PORT_VARIABLE}='${raw}' is not a port: use a number from 1 to 65535, or 'off' (or 0) to serve no metrics`,
    );
  }
  return port;
}

export interface MetricsServer {
  /** The port /metrics is served on. */
  port: number;
  /** Where the Temporal runtime's Prometheus exporter is to bind (workers/runtime.ts). */
  temporalBindAddress: string;
  close(): Promise<void>;
}

/**
 * Serves /metrics on `port` (all interfaces, for a Prometheus elsewhere to
 * scrape). Start it before the Temporal runtime is installed, and give the
 * runtime `temporalBindAddress`.
 */
export async function startMetricsServer(options: { port: number; host?: string }): Promise<MetricsServer> {
  const temporalPort = await freeLoopbackPort();
  const temporalUrl = `http://127.0.0.1:${temporalPort}/metrics`;
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found: metrics are served at GET /metrics\n');
      return;
    }
    scrape(temporalUrl).then(
      (text) => res.writeHead(200, { 'content-type': metricsRegistry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`metrics: ${err.message}\n`),
    );
  });
  await listen(server, options.port, options.host);
  return {
    port: (server.address() as AddressInfo).port,
    temporalBindAddress: `127.0.0.1:${temporalPort}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

async function scrape(temporalUrl: string): Promise<string> {
  const [own, temporal] = await Promise.all([metricsRegistry.metrics(), temporalMetrics(temporalUrl)]);
  return `${own.trimEnd()}\n${temporal}`;
}

/** The SDK's exporter output; a comment in its place when it does not answer (say, the runtime was installed without it). */
async function temporalMetrics(url: string): Promise<string> {
  try {
    const response = await fetch(url, { signal: AbortSignal.timeout(TEMPORAL_SCRAPE_TIMEOUT_MS) });
    if (!response.ok) return `# Temporal SDK metrics unavailable: ${url} answered HTTP ${response.status}\n`;
    return await response.text();
  } catch (err) {
    return `# Temporal SDK metrics unavailable: ${url}: ${(err as Error).message}\n`;
  }
}

function listen(server: http.Server, port: number, host?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      if (err.code === 'EADDRINUSE') {
        reject(
          new MetricsConfigError(
            `cannot serve metrics: port ${port} (${METRICS_PORT_VARIABLE}) is already in use, perhaps by another worker on this machine; ` +
              `set ${METRICS_PORT_VARIABLE} to a free port, or to 'off' to serve no metrics`,
          ),
        );
      } else {
        reject(new Error(`cannot serve metrics on port ${port} (${METRICS_PORT_VARIABLE}): ${err.message}`));
      }
    });
    server.listen(port, host, () => resolve());
  });
}

/** A loopback port free right now (the OS picks it); the Temporal runtime binds it moments later. */
function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = http.createServer();
    probe.once('error', reject);
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}
