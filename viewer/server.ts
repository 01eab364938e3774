/**
 * `harness-s ui`: the trajectory viewer's HTTP server. Read-only (GET and
 * HEAD; its database sessions cannot write), bound to loopback unless told
 * otherwise, and every page is self-contained HTML: its
 * Content-Security-Policy lets it load nothing from anywhere.
 *
 *   /runs                                   runs, newest first
 *   /runs/RUN                               a run's steps and evaluations
 *   /runs/RUN/steps/N                       a step's groups, routing and rescues
 *   /runs/RUN/trajectories/PHASE/STEP/TASK/HARNESS/SAMPLE   one rollout
 *   /runs/RUN/tasks/TASK                    a task side by side
 *   /runs/RUN/rollouts                      the run's rollouts, filtered
 *   /runs/RUN/report                        the run's HTML report
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { redactedDatabaseUrl } from '../core/store/run-store';
import { UI_PORT_VARIABLE, ViewerConfigError } from '../core/viewer-address';
import { loadRunReport, runReportPage } from '../core/report/run-report';
import { html, page } from './layout';
import { runPage, runsPage, type ViewerLinks } from './run-pages';
import { stepPage } from './step-page';
import { rolloutsPage, sideBySidePage, trajectoryPage } from './trajectory-pages';
import { temporalLinks } from './temporal-links';
import { ViewerStore } from './viewer-store';

/** A page that is not there: 404 with what was asked and where to look. */
class NotFound extends Error {}

export interface Viewer {
  url: string;
  close(): Promise<void>;
}

const HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  // Inline styles only: no script, no image, font or frame from anywhere, not even this server.
  'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

function errorPage(status: number, message: string): string {
  return page({
    title: status === 404 ? 'Not found' : status === 405 ? 'Read-only' : 'Error',
    simulated: false,
    trail: [],
    body: html`<p>${message}</p><p><a href="/runs">All runs</a></p>`,
  });
}

function stepNumber(text: string, what: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0) throw new NotFound(`${what} ${text} is not a whole number from 0 up`);
  return n;
}

async function route(store: ViewerStore, links: ViewerLinks, url: URL): Promise<string> {
  const parts = url.pathname
    .split('/')
    .filter((p) => p.length > 0)
    .map((p) => decodeURIComponent(p));
  const query = url.searchParams;
  if (parts.length === 0 || (parts.length === 1 && parts[0] === 'runs')) return runsPage(store, links, query);
  if (parts[0] !== 'runs') throw new NotFound(`no page at ${url.pathname}: the viewer's pages start at /runs`);
  const runId = parts[1];
  const run = await store.run(runId);
  if (!run) throw new NotFound(`no run ${runId} in this run store`);
  const [, , section, ...rest] = parts;
  if (section === undefined) return runPage(store, links, run, query);
  if (section === 'steps' && rest.length === 1) {
    const step = await store.step(runId, stepNumber(rest[0], 'step'));
    if (!step) throw new NotFound(`run ${runId} has no recorded step ${rest[0]}`);
    return stepPage(store, run, step, query);
  }
  if (section === 'trajectories' && rest.length === 5) {
    const [phase, step, taskId, harnessId, sample] = rest;
    const t = await store.trajectory(runId, {
      phase,
      step: stepNumber(step, 'step'),
      taskId,
      harnessId,
      sample: stepNumber(sample, 'sample'),
    });
    if (!t)
      throw new NotFound(`run ${runId} has no ${phase} rollout of task ${taskId} under ${harnessId} at step ${step}, sample ${sample}`);
    return trajectoryPage(run, t);
  }
  if (section === 'tasks' && rest.length === 1) {
    const view = await sideBySidePage(store, run, rest[0]);
    if (!view) throw new NotFound(`run ${runId} has no rollout of task ${rest[0]}`);
    return view;
  }
  if (section === 'rollouts' && rest.length === 0) return rolloutsPage(store, run, query);
  if (section === 'report' && rest.length === 0)
    return runReportPage(await loadRunReport(store.runs, runId), new Date(), `${url.protocol}//${url.host}`);
  throw new NotFound(`no page at ${url.pathname}`);
}

/** Serves the viewer until closed; `port` 0 takes a free one. */
export async function startViewer(options: {
  store: ViewerStore;
  links: ViewerLinks;
  host: string;
  port: number;
  onError?: (err: Error, path: string) => void;
}): Promise<Viewer> {
  const { store, links } = options;
  const server = http.createServer((req, res) => {
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { ...HEADERS, allow: 'GET, HEAD' }).end(errorPage(405, 'The viewer only reads: it answers GET and HEAD.'));
      return;
    }
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? 'localhost'}`);
    if (url.pathname === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    route(store, links, url).then(
      (body) => res.writeHead(200, HEADERS).end(req.method === 'HEAD' ? undefined : body),
      (err: Error) => {
        const notFound = err instanceof NotFound || err instanceof URIError;
        if (!notFound) options.onError?.(err, url.pathname);
        res
          .writeHead(notFound ? 404 : 500, HEADERS)
          .end(errorPage(notFound ? 404 : 500, notFound ? err.message : `This page failed: ${err.message}`));
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => {
      reject(
        err.code === 'EADDRINUSE'
          ? new ViewerConfigError(`port ${options.port} on ${options.host} is taken: set ${UI_PORT_VARIABLE} to another port`)
          : err,
      );
    });
    server.listen(options.port, options.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const host = options.host.includes(':') ? `[${options.host}]` : options.host;
  return {
    url: `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/**
 * The viewer over a run store and the Temporal server the environment names
 * (TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE): what `harness-s ui` and
 * `harness-s dev` start. Closing it closes its connections too.
 */
export async function serveRunStore(options: {
  databaseUrl: string;
  temporalAddress: string;
  namespace: string;
  host: string;
  port: number;
  onError?: (err: Error, path: string) => void;
  /** The most PostgreSQL connections the viewer opens ($HARNESS_S_DB_POOL_SIZE, read at process start). */
  dbPoolSize?: number;
}): Promise<Viewer> {
  const store = ViewerStore.connect(options.databaseUrl, options.dbPoolSize);
  const links = temporalLinks({ address: options.temporalAddress, namespace: options.namespace });
  try {
    await store.check(redactedDatabaseUrl(options.databaseUrl));
    const viewer = await startViewer({ store, links, host: options.host, port: options.port, onError: options.onError });
    return {
      url: viewer.url,
      close: async () => {
        await viewer.close();
        await links.close();
        await store.close();
      },
    };
  } catch (err) {
    await links.close();
    await store.close();
    throw err;
  }
}
