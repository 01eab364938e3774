/** Process-wide Temporal runtime settings: the SDK core logs warnings and up only. */
import { DefaultLogger, Runtime } from '@temporalio/worker';

let installed = false;

/** Safe to call more than once; the runtime can be installed only before its first use. */
export function installQuietTemporalRuntime(): void {
  if (installed) return;
  installed = true;
  try {
    Runtime.install({ logger: new DefaultLogger('WARN') });
  } catch {
    // Already created by an earlier use in this process: keep its logger.
  }
}
