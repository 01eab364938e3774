/**
 * An MLflow tracking server from the venv `harness-s mlflow setup` made
 * (infra/mlflow/install.ts): `mlflow server` bound to 127.0.0.1, runs and
 * metrics in PostgreSQL (its database created when missing), artifacts in a
 * folder it serves itself (the proxied artifact API). `harness-s mlflow
 * serve` and the integration tests start it.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, promises as fs } from 'node:fs';
import path from 'node:path';
import { ensureDatabase } from '../../core/store/run-store';
import { mlflowInstall, type MlflowInstall } from './install';

export const DEFAULT_MLFLOW_BACKEND = 'postgresql://postgres@127.0.0.1:5432/harness_s_mlflow';
export const DEFAULT_MLFLOW_PORT = 5000;
/** The first start migrates an empty database, which takes a while. */
const READY_TIMEOUT_MS = 180_000;

export class MlflowServerError extends Error {
  override name = 'MlflowServerError';
}

export interface MlflowServerOptions {
  port: number;
  /** Where runs and metrics go (SQLAlchemy URI); a postgresql:// database is created when missing. */
  backendStoreUri: string;
  /** The folder the server keeps artifacts in. */
  artifactsDir: string;
  /** The server's output: appended to this file, or shown on this process's stderr when absent. */
  logFile?: string;
  install?: MlflowInstall;
}

export interface MlflowServer {
  url: string;
  process: ChildProcess;
  /** Stops the server and its worker processes. */
  stop(): Promise<void>;
}

/** The venv's install, or an error saying how to make it. */
export function requireMlflowInstall(): MlflowInstall {
  const installed = mlflowInstall();
  if (!installed)
    throw new MlflowServerError('MLflow is not installed here: run `harness-s mlflow setup` (or `npx tsx cli/main.ts mlflow setup`) first');
  return installed;
}

export async function startMlflowServer(options: MlflowServerOptions): Promise<MlflowServer> {
  const install = options.install ?? requireMlflowInstall();
  if (/^postgres(ql)?(\+\w+)?:/.test(options.backendStoreUri)) {
    await ensureDatabase(options.backendStoreUri.replace(/^postgres(ql)?(\+\w+)?:/, 'postgresql:'));
  }
  await fs.mkdir(options.artifactsDir, { recursive: true });
  const url = `http://127.0.0.1:${options.port}`;
  const args = [
    'server',
    '--host',
    '127.0.0.1',
    '--port',
    String(options.port),
    '--workers',
    '1',
    '--backend-store-uri',
    options.backendStoreUri,
    '--artifacts-destination',
    path.resolve(options.artifactsDir),
  ];
  const log = options.logFile ? createWriteStream(options.logFile, { flags: 'a' }) : null;
  // Its own process group: `mlflow server` starts uvicorn and a job runner, stopped together.
  const child = spawn(install.mlflow, args, { detached: true, stdio: ['ignore', log ? 'pipe' : 'inherit', log ? 'pipe' : 'inherit'] });
  if (log) {
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
  }
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      try {
        process.kill(-child.pid, 'SIGTERM');
      } catch {
        // already gone
      }
      const killLater = setTimeout(() => child.pid !== undefined && process.kill(-child.pid, 'SIGKILL'), 10_000);
      await exited;
      clearTimeout(killLater);
    }
    log?.end();
  };
  const deadline = Date.now() + READY_TIMEOUT_MS;
  for (;;) {
    if (child.exitCode !== null) {
      log?.end();
      throw new MlflowServerError(
        `mlflow server exited with code ${child.exitCode} before answering at ${url}${options.logFile ? ` (log: ${options.logFile})` : ''}`,
      );
    }
    const ok = await fetch(`${url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      (r) => r.ok,
      () => false,
    );
    if (ok) return { url, process: child, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new MlflowServerError(
        `mlflow server did not answer at ${url}/health within ${READY_TIMEOUT_MS / 1000} s${options.logFile ? ` (log: ${options.logFile})` : ''}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}
