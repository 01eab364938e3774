/**
 * The servers an env config makes the workers talk to or start, for
 * `harness-s config check`'s list of endpoints: each env's registration says
 * (its `servers`); an env without servers runs inside the workers.
 */
import type { ConfigEndpoint } from '../config-check';
import { isSimulatedEnv } from '../sim-kind';
import type { EnvConfig } from './env-configs';
import { ENV_REGISTRATIONS } from './registry';

export function envEndpoints(env: EnvConfig): ConfigEndpoint[] {
  const simulated = isSimulatedEnv(env.kind);
  // The kind's own registration, not resolved: a module env's module is not loaded to check its config.
  const servers = ENV_REGISTRATIONS.get(env.kind)?.servers?.(env) ?? [];
  if (servers.length === 0) return [{ role: 'env', path: 'env', address: 'in the workers', simulated, note: `env ${env.kind}` }];
  return servers.map((server) => ({ role: 'env', simulated, ...server }));
}
