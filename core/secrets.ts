/**
 * API keys by reference: a config names the environment variable that holds
 * an endpoint's key (`apiKeyEnv`), read in the worker process that makes the
 * call, so the key itself never enters a workflow history or the run store
 * (core/config.ts refuses a literal key).
 */
import { UserError } from './errors';

export class MissingSecretError extends UserError {
  override name = 'MissingSecretError';
}

/** What OpenAI-compatible servers without auth accept as a key. */
export const NO_API_KEY = 'EMPTY';

/** The key of an endpoint: the value of $apiKeyEnv in this process, or no key when the config names none. */
export function apiKeyOf(endpoint: { apiKeyEnv?: string }, where: string): string {
  if (!endpoint.apiKeyEnv) return NO_API_KEY;
  const value = process.env[endpoint.apiKeyEnv];
  if (!value) {
    throw new MissingSecretError(`${where}.apiKeyEnv names $${endpoint.apiKeyEnv}, which is not set in this worker's environment; set it where the workers run`);
  }
  return value;
}
