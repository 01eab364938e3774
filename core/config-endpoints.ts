/**
 * What every endpoint in a config is made of: its URL and where its API key
 * comes from; and the embedded sim cluster's address, the default endpoint.
 */
import { z } from 'zod';

export const SIM_CLUSTER_URL = 'http://127.0.0.1:8765';

/**
 * Where an endpoint's API key comes from: the name of an environment variable
 * of the worker processes, read where the call is made (core/secrets.ts). A
 * config never holds the key itself: configs are stored in every Temporal
 * history and in the run store. No key is sent when absent.
 */
export const ApiKeyEnv = z
  .string()
  .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'the name of an environment variable of the workers, such as VLLM_API_KEY')
  .optional();

export const Url = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL such as http://127.0.0.1:8000' });
