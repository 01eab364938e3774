/**
 * Asking a proposer: one chat completion from an OpenAI-compatible endpoint
 * (a hosted LLM, vLLM, or the sim cluster's SIMULATED `sim-proposer`). An
 * endpoint that refuses the request itself (bad key, unknown model) is the
 * user's to fix; one that cannot be reached or fails is retried by the caller.
 */
import OpenAI, { APIError } from 'openai';
import { UserError } from '../errors';
import { apiKeyOf } from '../secrets';
import type { ChatMessage } from '../policy/trajectory';
import type { ProposerConfig } from './config';

export class ProposerRefusedError extends UserError {
  override name = 'ProposerRefusedError';
}

export class ProposerUnavailableError extends Error {
  override name = 'ProposerUnavailableError';
}

/** How a proposer is named in records and messages. */
export const proposerLabel = (p: Pick<ProposerConfig, 'model' | 'baseUrl'>) => `${p.model}@${p.baseUrl}`;

const REFUSED = [400, 401, 403, 404, 422];

export async function askProposer(proposer: ProposerConfig, messages: readonly ChatMessage[], where: string, signal?: AbortSignal): Promise<string> {
  const client = new OpenAI({ baseURL: proposer.baseUrl, apiKey: apiKeyOf(proposer, where), timeout: proposer.timeoutSeconds * 1000, maxRetries: 0 });
  try {
    const response = await client.chat.completions.create(
      { model: proposer.model, messages: [...messages], temperature: proposer.temperature, max_tokens: proposer.maxTokens },
      { signal },
    );
    return response.choices[0]?.message?.content ?? '';
  } catch (err) {
    const label = proposerLabel(proposer);
    if (err instanceof APIError && err.status !== undefined && REFUSED.includes(err.status)) {
      throw new ProposerRefusedError(`proposer ${label} refused the request: HTTP ${err.status}: ${err.message} (check ${where}.model and ${where}.apiKeyEnv)`);
    }
    throw new ProposerUnavailableError(`proposer ${label}: ${(err as Error).message}`);
  }
}
