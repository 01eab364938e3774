/** Process-wide Temporal runtime settings: the SDK core logs warnings and up only. */
import { DefaultLogger, Runtime } from '@temporalio/worker';

let installed = false;

/** Safe to call more than once; the runtime can be installed only before its first use. */
export function installQuietTemporalRuntime(): void {
  if (installed) return;
  installed = true;
  try {
    const logger = new DefaultLogger('WARN', (entry) => {
      // A worker serving only activity queues is a normal shape here, not a problem.
      if (entry.message.startsWith('No workflows registered')) return;
      process.stderr.write(`[temporal ${entry.level}] ${entry.message} ${JSON.stringify(entry.meta ?? {})}\n`);
    });
    Runtime.install({ logger });
  } catch {
    // Already created by an earlier use in this process: keep its logger.
  }
}
