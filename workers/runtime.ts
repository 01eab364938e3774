/**
 * Process-wide Temporal runtime settings: the SDK core logs warnings and up
 * only, and, when asked, serves its metrics in the Prometheus format.
 */
import { DefaultLogger, IllegalStateError, Runtime } from '@temporalio/worker';

let installed = false;

export interface TemporalRuntimeOptions {
  /** host:port where the SDK's Prometheus exporter serves /metrics (workers/metrics-server.ts reads it there). */
  prometheusBindAddress?: string;
}

/**
 * Safe to call more than once; the runtime can be installed only before its
 * first use. True when this call installed it (with these options).
 */
export function installQuietTemporalRuntime(options: TemporalRuntimeOptions = {}): boolean {
  if (installed) return false;
  installed = true;
  try {
    const logger = new DefaultLogger('WARN', (entry) => {
      // A worker serving only activity queues is a normal shape here, not a problem.
      if (entry.message.startsWith('No workflows registered')) return;
      process.stderr.write(`[temporal ${entry.level}] ${entry.message} ${JSON.stringify(entry.meta ?? {})}\n`);
    });
    const metrics = options.prometheusBindAddress ? { metrics: { prometheus: { bindAddress: options.prometheusBindAddress } } } : {};
    Runtime.install({ logger, telemetryOptions: metrics });
    return true;
  } catch (err) {
    // Already created by an earlier use in this process: keep its logger. Anything else (an exporter that cannot bind) is an error.
    if (err instanceof IllegalStateError) return false;
    throw err;
  }
}
