/**
 * The policy as an OpenAI-compatible endpoint (vLLM in production, the sim
 * cluster by default), reached through the `openai` package.
 */
import OpenAI from 'openai';
import type { ChatMessage, TurnTokens } from './trajectory';
import { UserError } from '../errors';

export interface PolicyEndpoint {
  baseUrl: string;
  apiKey: string;
  requestTimeoutSeconds: number;
  /**
   * Training needs the exact token ids (vLLM's return_token_ids); evaluation
   * of an endpoint that has none (a hosted API) can do without: false.
   */
  requireTokens?: boolean;
}

export interface PolicyReply extends TurnTokens {
  content: string;
}

export interface PolicyRequest {
  model: string;
  messages: ChatMessage[];
  temperature: number;
  seed: number;
  maxTokens?: number;
}

/** Anything that produces assistant turns with their exact tokens. */
export interface Policy {
  complete(request: PolicyRequest): Promise<PolicyReply>;
}

export class PolicyResponseError extends UserError {
  override name = 'PolicyResponseError';
}

/** vLLM's extra response fields (return_token_ids), absent from the openai types. */
interface VllmChoice {
  token_ids?: number[];
  logprobs?: { content?: Array<{ logprob: number }> | null } | null;
}

export class PolicyClient implements Policy {
  private readonly openai: OpenAI;
  private readonly requireTokens: boolean;

  constructor(endpoint: PolicyEndpoint) {
    this.requireTokens = endpoint.requireTokens ?? true;
    this.openai = new OpenAI({
      baseURL: endpoint.baseUrl,
      apiKey: endpoint.apiKey,
      timeout: endpoint.requestTimeoutSeconds * 1000,
      maxRetries: 2,
    });
  }

  /** One assistant turn, with the prompt and completion token ids and logprobs the server used. */
  async complete(request: PolicyRequest): Promise<PolicyReply> {
    const body = {
      model: request.model,
      messages: request.messages,
      temperature: request.temperature,
      seed: request.seed,
      logprobs: true,
      max_tokens: request.maxTokens,
      // vLLM extension: the exact prompt and completion token ids.
      return_token_ids: true,
    };
    const response = (await this.openai.chat.completions.create(
      body as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
    )) as OpenAI.Chat.ChatCompletion & { prompt_token_ids?: number[] };
    const choice = response.choices[0] as (OpenAI.Chat.ChatCompletion.Choice & VllmChoice) | undefined;
    if (!choice) throw new PolicyResponseError(`policy ${request.model}: the response has no choices`);
    const promptTokenIds = response.prompt_token_ids;
    const tokenIds = choice.token_ids;
    const logprobs = choice.logprobs?.content?.map((entry) => entry.logprob);
    if (!this.requireTokens && (!promptTokenIds || !tokenIds || !logprobs)) {
      return { content: choice.message.content ?? '', promptTokenIds: [], tokenIds: [], logprobs: [] };
    }
    if (!promptTokenIds || !tokenIds || !logprobs) {
      throw new PolicyResponseError(
        `policy ${request.model}: the server returned no ${!promptTokenIds ? 'prompt_token_ids' : !tokenIds ? 'choices[0].token_ids' : 'choices[0].logprobs'}; ` +
          'training needs the exact tokens: use vLLM >= 0.10.2 (return_token_ids) or the sim cluster',
      );
    }
    if (logprobs.length !== tokenIds.length) {
      throw new PolicyResponseError(
        `policy ${request.model}: ${tokenIds.length} token ids but ${logprobs.length} logprobs in choices[0]`,
      );
    }
    return { content: choice.message.content ?? '', promptTokenIds, tokenIds, logprobs };
  }
}
