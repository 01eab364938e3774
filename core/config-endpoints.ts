/**
 * What every endpoint in a config is made of: its URL and where its API key
 * comes from; and the embedded sim cluster's address, the default endpoint.
 */
import { z } from 'zod';

export const SIM_CLUSTER_URL = 'http://127.0.0.1:8765';

/** The model the SIMULATED sim cluster serves as the base policy (the default policy.model). */
export const SIM_POLICY_MODEL = 'sim-policy-base';

/**
 * Where an endpoint's API key comes from: the name of an environment variable
 * of the worker processes, read where the call is made (core/secrets.ts). A
 * config never holds the key itself: configs are stored in every Temporal
 * history and in the run store. No key is sent when absent.
 */
export const ApiKeyEnv = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'the name of an environment variable of the workers, such as VLLM_API_KEY')
  .optional()
  .describe(
    "The name of the workers' environment variable that holds this endpoint's API key (such as VLLM_API_KEY; names ending _API_KEY or _TOKEN, or listed in $HARNESS_S_KEY_ENV_ALLOW); no key is sent when absent, and a config never holds the key itself.",
  );

export const Url = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL such as http://127.0.0.1:8000' });

/**
 * Whether a URL is the embedded sim cluster's address (127.0.0.1 or localhost
 * at the sim cluster's port): an endpoint there is SIMULATED.
 */
export function isSimClusterUrl(url: string): boolean {
  try {
    const { hostname, port } = new URL(url);
    const sim = new URL(SIM_CLUSTER_URL);
    return port === sim.port && ['127.0.0.1', 'localhost', '[::1]'].includes(hostname);
  } catch {
    return false;
  }
}
