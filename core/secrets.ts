/**
 * API keys by reference: a config names the environment variable that holds
 * an endpoint's key (`apiKeyEnv`), read in the worker process that makes the
 * call, so the key itself never enters a workflow history or the run store
 * (core/config.ts refuses a literal key).
 *
 * A config may also point `baseUrl` at any host, so `apiKeyEnv` could name
 * any variable of the worker (`DATABASE_URL`, say) and send it out as a
 * bearer token. Only names that look like keys (`*_API_KEY`, `*_TOKEN`) are
 * read, and those the operator lists in the worker's environment
 * (`HARNESS_S_KEY_ENV_ALLOW`, comma-separated); any other name is refused
 * before a request is made.
 */
import { UserError } from './errors';

export class MissingSecretError extends UserError {
  override name = 'MissingSecretError';
}

export class RefusedSecretError extends UserError {
  override name = 'RefusedSecretError';
}

/** What OpenAI-compatible servers without auth accept as a key. */
export const NO_API_KEY = 'EMPTY';

/** The worker's variable listing further names `apiKeyEnv` may read. */
export const KEY_ENV_ALLOW_LIST = 'HARNESS_S_KEY_ENV_ALLOW';

const KEY_LIKE_NAME = /^[A-Za-z_][A-Za-z0-9_]*_(API_KEY|TOKEN)$/;

/** The names the operator allows besides key-like ones, from $HARNESS_S_KEY_ENV_ALLOW. */
export function operatorKeyEnvNames(env: NodeJS.ProcessEnv = process.env): Set<string> {
  return new Set(
    (env[KEY_ENV_ALLOW_LIST] ?? '')
      .split(',')
      .map((name) => name.trim())
      .filter(Boolean),
  );
}

/** Whether `apiKeyEnv` may name this variable: it looks like a key, or the operator listed it. */
export function mayReadAsKey(name: string, env: NodeJS.ProcessEnv = process.env): boolean {
  return KEY_LIKE_NAME.test(name) || operatorKeyEnvNames(env).has(name);
}

/** The key of an endpoint: the value of $apiKeyEnv in this process, or no key when the config names none. */
export function apiKeyOf(endpoint: { apiKeyEnv?: string }, where: string, env: NodeJS.ProcessEnv = process.env): string {
  if (!endpoint.apiKeyEnv) return NO_API_KEY;
  if (!mayReadAsKey(endpoint.apiKeyEnv, env)) {
    throw new RefusedSecretError(
      `${where}.apiKeyEnv names $${endpoint.apiKeyEnv}, which is not read as an API key: only variables named *_API_KEY or *_TOKEN are, ` +
        `so that a config cannot send another of the worker's variables (a database URL, say) to its endpoint. ` +
        `Rename the variable, or have the operator add it to ${KEY_ENV_ALLOW_LIST} (comma-separated) in the workers' environment`,
    );
  }
  const value = env[endpoint.apiKeyEnv];
  if (!value) {
    throw new MissingSecretError(
      `${where}.apiKeyEnv names $${endpoint.apiKeyEnv}, which is not set in this worker's environment; set it where the workers run`,
    );
  }
  return value;
}
