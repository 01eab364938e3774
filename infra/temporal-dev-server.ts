/**
 * The Temporal dev server (`temporal server start-dev`) for the embedded
 * default and the tests: a SQLite file under the data folder so runs survive a
 * restart, the Web UI on, the project's search attributes registered.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, openSync } from 'node:fs';
import path from 'node:path';
import { Connection } from '@temporalio/client';
import { temporal } from '@temporalio/proto';
import { SEARCH_ATTRIBUTES } from '../workflows/definitions';
import { namespaceFromEnv, temporalAddressFromEnv } from '../workers/temporal-env';
import { uiUrlFor } from '../viewer/temporal-links';

export { uiUrlFor };
import { ensureTemporalCli, PROJECT_ROOT } from './temporal-cli';

export const DATA_DIR = path.join(PROJECT_ROOT, '.data');

const SEARCH_ATTRIBUTE_FLAGS = Object.values(SEARCH_ATTRIBUTES).map((key) => {
  const type = {
    KEYWORD: 'Keyword',
    INT: 'Int',
    DOUBLE: 'Double',
    TEXT: 'Text',
    BOOL: 'Bool',
    DATETIME: 'Datetime',
    KEYWORD_LIST: 'KeywordList',
  }[key.type];
  return `${key.name}=${type}`;
});

export interface DevServerOptions {
  address?: string;
  /** SQLite file; runs survive a restart. */
  dbFile?: string;
  /** Extra dynamic config, e.g. { 'limit.historyCount.suggestContinueAsNew': 200 }. */
  dynamicConfig?: Record<string, string | number | boolean>;
  /** Where the server's output goes. */
  logFile?: string;
  log?: (line: string) => void;
  readyTimeoutMs?: number;
}

export interface DevServer {
  address: string;
  uiUrl: string;
  /** Null when an already-running server was reused. */
  process: ChildProcess | null;
  stop(): Promise<void>;
}

async function tryConnect(address: string): Promise<Connection | null> {
  let connection: Connection | undefined;
  try {
    connection = await Connection.connect({ address, connectTimeout: 1000 });
    await connection.workflowService.getSystemInfo({});
    return connection;
  } catch {
    await connection?.close().catch(() => undefined);
    return null;
  }
}

/** Registers the project's search attributes on a server that lacks them (idempotent). */
export async function ensureSearchAttributes(connection: Connection, namespace: string): Promise<void> {
  const existing = await connection.operatorService.listSearchAttributes({ namespace });
  const missing = Object.values(SEARCH_ATTRIBUTES).filter((key) => !(key.name in (existing.customAttributes ?? {})));
  if (missing.length === 0) return;
  const IndexedValueType = temporal.api.enums.v1.IndexedValueType;
  const types: Record<string, number> = {
    KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
    DOUBLE: IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
  };
  await connection.operatorService.addSearchAttributes({
    namespace,
    searchAttributes: Object.fromEntries(missing.map((key) => [key.name, types[key.type]])),
  });
}

/**
 * Starts the dev server unless one already answers at the address; waits until
 * it answers and has the search attributes.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  const address = options.address ?? temporalAddressFromEnv();
  const log = options.log ?? (() => undefined);
  const uiUrl = uiUrlFor(address);
  const running = await tryConnect(address);
  if (running) {
    await ensureSearchAttributes(running, namespaceFromEnv());
    await running.close();
    log(`Temporal already answers at ${address}; using it`);
    return { address, uiUrl, process: null, stop: async () => undefined };
  }

  const cli = await ensureTemporalCli(log);
  const [host, port] = address.split(':');
  const dbFile = options.dbFile ?? path.join(DATA_DIR, 'temporal.sqlite');
  mkdirSync(path.dirname(dbFile), { recursive: true });
  const args = [
    'server',
    'start-dev',
    '--ip',
    host,
    '--port',
    port,
    '--ui-port',
    String(Number(port) + 1000),
    '--db-filename',
    dbFile,
    '--namespace',
    namespaceFromEnv(),
    '--log-level',
    'warn',
    ...SEARCH_ATTRIBUTE_FLAGS.flatMap((flag) => ['--search-attribute', flag]),
    ...Object.entries(options.dynamicConfig ?? {}).flatMap(([k, v]) => ['--dynamic-config-value', `${k}=${JSON.stringify(v)}`]),
  ];
  const logFile = options.logFile ?? path.join(DATA_DIR, 'temporal-server.log');
  mkdirSync(path.dirname(logFile), { recursive: true });
  const out = openSync(logFile, 'a');
  log(`starting the Temporal dev server: ${cli.path} ${args.join(' ')}`);
  const child = spawn(cli.path, args, { stdio: ['ignore', out, out] });
  let exited: string | null = null;
  // The dev server never outlives the process that started it.
  const killChild = () => child.kill('SIGTERM');
  process.once('exit', killChild);
  child.on('exit', (code, signal) => {
    exited = `exited with ${signal ?? `code ${code}`}`;
    process.off('exit', killChild);
  });

  const deadline = Date.now() + (options.readyTimeoutMs ?? 60_000);
  for (;;) {
    if (exited) throw new Error(`the Temporal dev server ${exited} before it answered; see ${logFile}`);
    const connection = await tryConnect(address);
    if (connection) {
      await ensureSearchAttributes(connection, namespaceFromEnv());
      await connection.close();
      break;
    }
    if (Date.now() > deadline) {
      child.kill('SIGTERM');
      throw new Error(
        `the Temporal dev server did not answer at ${address} within ${(options.readyTimeoutMs ?? 60_000) / 1000}s; see ${logFile}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  log(`Temporal dev server ready at ${address}; Web UI at ${uiUrl}`);
  return {
    address,
    uiUrl,
    process: child,
    stop: () =>
      new Promise<void>((resolve) => {
        if (exited) return resolve();
        // SIGTERM first; SIGKILL if it has not gone within 10 s.
        const force = setTimeout(() => child.kill('SIGKILL'), 10_000);
        child.once('exit', () => {
          clearTimeout(force);
          resolve();
        });
        child.kill('SIGTERM');
      }),
  };
}
