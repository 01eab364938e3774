/**
 * A worker in its own process (`node --import tsx workers/main.ts`), as an
 * operator runs it, so tests can kill it with SIGKILL mid-step.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { TEST_DATABASE_URL, TEST_TEMPORAL_ADDRESS } from './env';

const ROOT = path.resolve(__dirname, '..', '..');
/** Every worker process this test file started that has not exited, ready or not. */
const live = new Set<ChildProcess>();

/**
 * Starts a worker process on `queues` (all when absent) and resolves once it
 * is serving them. It serves no metrics unless `env` sets HARNESS_S_METRICS_PORT,
 * so test workers never contend for the default port.
 */
export function startWorkerProcess(queues?: string[], env: Record<string, string> = {}): Promise<ChildProcess> {
  // node itself runs the worker (tsx as a loader, not a wrapper process), so SIGKILL hits the worker.
  const child = spawn(process.execPath, ['--import', 'tsx', 'workers/main.ts', ...(queues ? ['--queues', queues.join(',')] : [])], {
    cwd: ROOT,
    env: {
      ...process.env,
      TEMPORAL_ADDRESS: TEST_TEMPORAL_ADDRESS,
      DATABASE_URL: TEST_DATABASE_URL,
      LOG_LEVEL: 'warn',
      HARNESS_S_METRICS_PORT: 'off',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return new Promise((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`worker exited early with code ${code}`)));
    child.stdout!.on('data', (chunk: Buffer) => {
      if (chunk.toString().includes('"ready":true')) resolve(child);
    });
  });
}

/** Stops the workers still running (SIGTERM: a graceful shutdown) and waits for them. */
export async function stopWorkerProcesses(workers: readonly ChildProcess[]): Promise<void> {
  await Promise.all(
    workers.map(async (w) => {
      w.stdout?.destroy();
      if (w.exitCode !== null || w.signalCode !== null) return;
      const exited = new Promise((resolve) => w.once('exit', resolve));
      w.kill('SIGTERM');
      await exited;
    }),
  );
}

/** Stops every worker process still alive, also those that never got ready (a test that failed while starting several). */
export function stopAllWorkerProcesses(): Promise<void> {
  return stopWorkerProcesses([...live]);
}

/** Kills a worker with SIGKILL (no shutdown of any kind) and waits until it is gone. */
export async function killWorkerProcess(worker: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => worker.once('exit', resolve));
  worker.kill('SIGKILL');
  await exited;
}
