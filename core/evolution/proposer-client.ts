/**
 * Asking a proposer: one chat completion from an OpenAI-compatible endpoint
 * (a hosted LLM, vLLM, or the sim cluster's SIMULATED `sim-proposer`). An
 * endpoint that refuses the request itself (HTTP 400, 401, 403, 404, 422: a
 * bad key, an unknown model, a request past its limits) is the user's to fix
 * and fails the evolution; any other failure (no connection, a timeout, 408,
 * 409, 429, 5xx) is retried by the caller as the config's `retry` says.
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

export async function askProposer(
  proposer: ProposerConfig,
  messages: readonly ChatMessage[],
  where: string,
  signal?: AbortSignal,
): Promise<string> {
  const client = new OpenAI({
    baseURL: proposer.baseUrl,
    apiKey: apiKeyOf(proposer, where),
    timeout: proposer.timeoutSeconds * 1000,
    maxRetries: 0,
  });
  try {
    const response = await client.chat.completions.create(
      // Proposals are plain chat (no tools): each message goes as its role and text.
      {
        model: proposer.model,
        messages: messages.map(({ role, content }) => ({ role: role === 'tool' ? 'user' : role, content })),
        temperature: proposer.temperature,
        max_tokens: proposer.maxTokens,
      },
      { signal },
    );
    return response.choices[0]?.message?.content ?? '';
  } catch (err) {
    const label = proposerLabel(proposer);
    if (err instanceof APIError && err.status !== undefined && REFUSED.includes(err.status)) {
      const size = messages.reduce((n, m) => n + m.content.length, 0);
      const check =
        err.status === 401 || err.status === 403
          ? `${where}.apiKeyEnv (the key)`
          : err.status === 404
            ? `${where}.model and ${where}.baseUrl`
            : `${where}.model's limits: the request held ${size} characters (lower failuresInPrompt or turnChars) and temperature ${proposer.temperature}, maxTokens ${proposer.maxTokens}`;
      throw new ProposerRefusedError(
        `proposer ${where} (${label}) refused the request: HTTP ${err.status}: ${err.message}; check ${check}`,
      );
    }
    throw new ProposerUnavailableError(`proposer ${where} (${label}) is unavailable: ${(err as Error).message}`);
  }
}
