/**
 * What the viewer shows of Temporal: links to a run in its Web UI, and each
 * run's workflow status. Temporal being down costs the runs page its status
 * column ('unknown'), never the page.
 */
import { Client, Connection } from '@temporalio/client';
import type { ViewerLinks } from './run-pages';

/** The dev server's UI listens on its frontend port + 1000 unless told otherwise. */
export function uiUrlFor(address: string): string {
  if (process.env.TEMPORAL_UI_URL) return process.env.TEMPORAL_UI_URL;
  const [host, port] = address.split(':');
  return `http://${host}:${Number(port) + 1000}`;
}

/** How long a page waits for Temporal's answer before showing 'unknown'. */
const STATUS_TIMEOUT_MS = 3_000;
/** After a failed connect, how long before trying again. */
const RECONNECT_AFTER_MS = 10_000;

export interface TemporalLinks extends ViewerLinks {
  close(): Promise<void>;
}

export function temporalLinks(options: { address: string; namespace: string }): TemporalLinks {
  const ui = uiUrlFor(options.address);
  let connection: Promise<Connection> | null = null;
  let failedAt = 0;
  const connect = (): Promise<Connection> | null => {
    if (connection) return connection;
    if (Date.now() - failedAt < RECONNECT_AFTER_MS) return null;
    connection = Connection.connect({ address: options.address, connectTimeout: STATUS_TIMEOUT_MS });
    connection.catch(() => {
      connection = null;
      failedAt = Date.now();
    });
    return connection;
  };
  const within = <T>(work: Promise<T>): Promise<T | null> =>
    Promise.race([work.catch(() => null), new Promise<null>((resolve) => setTimeout(() => resolve(null), STATUS_TIMEOUT_MS).unref())]);

  return {
    temporalUi: (runId) => `${ui}/namespaces/${encodeURIComponent(options.namespace)}/workflows/${encodeURIComponent(runId)}`,
    async statuses(runIds) {
      const found = new Map<string, string>();
      const pending = connect();
      const conn = pending && (await within(pending));
      if (!conn) return found;
      const client = new Client({ connection: conn, namespace: options.namespace });
      await Promise.all(
        runIds.map(async (runId) => {
          const described = await within(client.workflow.getHandle(runId).describe());
          if (described) found.set(runId, described.status.name);
        }),
      );
      return found;
    },
    async close() {
      const conn = connection && (await connection.catch(() => null));
      await conn?.close();
    },
  };
}
