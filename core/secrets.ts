/**
 * API keys by reference: a config may name the environment variable that
 * holds an endpoint's key (`apiKeyEnv`), read in the worker process that
 * makes the call, so the key itself never enters a workflow history or the
 * run store.
 */
import { UserError } from './errors';

export class MissingSecretError extends UserError {
  override name = 'MissingSecretError';
}

/** The key of an endpoint: from $apiKeyEnv when it is set, else the config's literal `apiKey`. */
export function apiKeyOf(endpoint: { apiKey: string; apiKeyEnv?: string }, where: string): string {
  if (!endpoint.apiKeyEnv) return endpoint.apiKey;
  const value = process.env[endpoint.apiKeyEnv];
  if (!value) {
    throw new MissingSecretError(`${where}.apiKeyEnv names $${endpoint.apiKeyEnv}, which is not set in this worker's environment; set it where the workers run`);
  }
  return value;
}
