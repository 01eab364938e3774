/**
 * What `harness-s config check` says about a valid evolution config: the
 * endpoints the evolution will use, and the warnings a config that parses can
 * still deserve (the env and the executor from different worlds). Pure.
 */
import { isSimClusterUrl } from '../config-endpoints';
import { envPolicyWarnings, policyEndpoints, type ConfigEndpoint, type ConfigWarning } from '../config-check';
import { SIM_PROPOSER, type EvolutionConfig } from './config';

export function evolutionConfigWarnings(config: EvolutionConfig): ConfigWarning[] {
  return envPolicyWarnings(config.env, config.executor, 'executor');
}

/** Every endpoint an evolution config makes the evolution use, but its env's (core/envs/endpoints.ts). */
export function evolutionConfigEndpoints(config: EvolutionConfig): ConfigEndpoint[] {
  return [
    ...policyEndpoints(config.executor, 'executor', 'executor'),
    ...config.proposers.map((proposer, i) => ({
      role: 'proposer',
      path: `proposers.${i}.baseUrl`,
      address: proposer.baseUrl,
      model: proposer.model,
      ...(proposer.apiKeyEnv ? { apiKeyEnv: proposer.apiKeyEnv } : {}),
      simulated: proposer.model === SIM_PROPOSER || isSimClusterUrl(proposer.baseUrl),
    })),
  ];
}
