/**
 * The shipped trackers, looked up by name. A tracker joins here with its
 * registration (core/tracking/<name>/registration.ts) and its config schema
 * in core/tracking/tracker-configs.ts.
 */
import { mlflowTracker } from './mlflow/registration';
import type { TrackerRegistration } from './tracker';

const REGISTRATIONS: readonly TrackerRegistration[] = [mlflowTracker as TrackerRegistration];

export function trackerRegistration(name: string): TrackerRegistration {
  const found = REGISTRATIONS.find((r) => r.name === name);
  if (!found) throw new Error(`no tracker '${name}' is registered (registered: ${REGISTRATIONS.map((r) => r.name).join(', ')})`);
  return found;
}

/**
 * Where each tracker's server is, from this process's environment (each
 * registration's `endpointEnv`: 'MLFLOW_TRACKING_URI' for mlflow): read once
 * at worker start and passed to the activities. A tracker whose variable is
 * unset or empty is absent.
 */
export function trackingEndpointsFromEnv(env: NodeJS.ProcessEnv = process.env): Record<string, string> {
  return Object.fromEntries(REGISTRATIONS.flatMap((r) => (env[r.endpointEnv] ? [[r.name, env[r.endpointEnv] as string]] : [])));
}
