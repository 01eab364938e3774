/**
 * The real CPU stack for the files that use it (the real-engine runs, the
 * official tinker SDK): reused from its cache outside the clone, installed on
 * a machine's first run (about 4 minutes, 10.6 GB; `harness-s engines setup`
 * does the same ahead of time).
 */
import { setupEngines, type InstalledEngines } from '../../infra/engines/install';

/** How long a beforeAll that may install the stack waits. */
export const ENGINES_SETUP_TIMEOUT_MS = 20 * 60_000;

export function enginesForTests(): Promise<InstalledEngines> {
  return setupEngines((line) => process.stderr.write(`[engines setup] ${line}\n`));
}
