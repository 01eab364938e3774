/**
 * The policy as an OpenAI-compatible endpoint (vLLM in production, the sim
 * cluster by default), reached through the `openai` package.
 */
import OpenAI from 'openai';
import type { ChatMessage, ToolCall, ToolDefinition, TurnTokens } from './trajectory';
import { UserError } from '../errors';
import { z } from 'zod';
import { formatZodError } from '../zod-errors';
import { timePolicyRequest } from '../metrics';

export interface PolicyEndpoint {
  baseUrl: string;
  apiKey: string;
  requestTimeoutSeconds: number;
  /**
   * Training needs the exact token ids (vLLM's return_token_ids); evaluation
   * of an endpoint that has none (a hosted API) can do without: false.
   */
  requireTokens?: boolean;
  /** The client's own retries of a failed request (default 2); the replica balancer retries on another replica instead (0). */
  maxRetries?: number;
}

export interface PolicyReply extends TurnTokens {
  content: string;
  /** The function calls of the turn, when the request offered tools and the model called one. */
  toolCalls?: ToolCall[];
}

export interface PolicyRequest {
  model: string;
  messages: ChatMessage[];
  temperature: number;
  seed: number;
  maxTokens?: number;
  /** Tools the policy may call (vLLM: start it with --enable-auto-tool-choice and the model's --tool-call-parser). */
  tools?: ToolDefinition[];
}

/** Anything that produces assistant turns with their exact tokens. */
export interface Policy {
  complete(request: PolicyRequest): Promise<PolicyReply>;
}

export class PolicyResponseError extends UserError {
  override name = 'PolicyResponseError';
}

/**
 * The parts of a chat completion training reads, with vLLM's extensions
 * (return_token_ids), checked as they arrive: a reply outside this shape is
 * refused naming the field, not cast.
 */
const ChatReply = z.object({
  prompt_token_ids: z.array(z.number().int()).nullish(),
  choices: z.array(
    z.object({
      message: z.object({
        content: z.string().nullish(),
        tool_calls: z
          .array(
            z.object({
              id: z.string(),
              type: z.literal('function').default('function'),
              function: z.object({ name: z.string(), arguments: z.string() }),
            }),
          )
          .nullish(),
      }),
      token_ids: z.array(z.number().int()).nullish(),
      logprobs: z.object({ content: z.array(z.object({ logprob: z.number() })).nullish() }).nullish(),
    }),
  ),
});

export class PolicyClient implements Policy {
  private readonly openai: OpenAI;
  private readonly requireTokens: boolean;

  constructor(endpoint: PolicyEndpoint) {
    this.requireTokens = endpoint.requireTokens ?? true;
    this.openai = new OpenAI({
      baseURL: endpoint.baseUrl,
      apiKey: endpoint.apiKey,
      timeout: endpoint.requestTimeoutSeconds * 1000,
      maxRetries: endpoint.maxRetries ?? 2,
    });
  }

  /** One assistant turn, with the prompt and completion token ids and logprobs the server used. */
  complete(request: PolicyRequest, options: { signal?: AbortSignal } = {}): Promise<PolicyReply> {
    return timePolicyRequest(() => this.completeOnce(request, options.signal), policyErrorStatus);
  }

  private async completeOnce(request: PolicyRequest, signal?: AbortSignal): Promise<PolicyReply> {
    const body = {
      model: request.model,
      messages: request.messages,
      temperature: request.temperature,
      seed: request.seed,
      logprobs: true,
      max_tokens: request.maxTokens,
      ...(request.tools?.length ? { tools: request.tools } : {}),
      // vLLM extension: the exact prompt and completion token ids.
      return_token_ids: true,
    };
    // The openai types know no return_token_ids; the SDK sends extra body fields as they are.
    const raw: unknown = await this.openai.chat.completions.create(
      body as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming,
      signal ? { signal } : undefined,
    );
    const parsed = ChatReply.safeParse(raw);
    if (!parsed.success)
      throw new PolicyResponseError(
        `policy ${request.model}: the chat completion is not what this client reads:\n${formatZodError(parsed.error)}`,
      );
    const response = parsed.data;
    const choice = response.choices[0];
    if (!choice) throw new PolicyResponseError(`policy ${request.model}: the response has no choices`);
    const promptTokenIds = response.prompt_token_ids ?? undefined;
    const tokenIds = choice.token_ids ?? undefined;
    const logprobs = choice.logprobs?.content?.map((entry) => entry.logprob);
    const toolCalls = choice.message.tool_calls?.length ? choice.message.tool_calls : undefined;
    if (!this.requireTokens && (!promptTokenIds || !tokenIds || !logprobs)) {
      return { content: choice.message.content ?? '', toolCalls, promptTokenIds: [], tokenIds: [], logprobs: [] };
    }
    if (!promptTokenIds || !tokenIds || !logprobs) {
      throw new PolicyResponseError(
        `policy ${request.model}: the server returned no ${!promptTokenIds ? 'prompt_token_ids' : !tokenIds ? 'choices[0].token_ids' : 'choices[0].logprobs'}; ` +
          'training needs the exact tokens: use vLLM >= 0.10.2 (return_token_ids) or the sim cluster',
      );
    }
    if (logprobs.length !== tokenIds.length) {
      throw new PolicyResponseError(`policy ${request.model}: ${tokenIds.length} token ids but ${logprobs.length} logprobs in choices[0]`);
    }
    return { content: choice.message.content ?? '', toolCalls, promptTokenIds, tokenIds, logprobs };
  }
}

/** A failed request's metric label: the HTTP status, or what kept it from having one. */
function policyErrorStatus(err: unknown): string {
  if (err instanceof PolicyResponseError) return 'invalid_reply';
  if (err instanceof OpenAI.APIConnectionTimeoutError) return 'timeout';
  if (err instanceof OpenAI.APIUserAbortError) return 'aborted';
  if (err instanceof OpenAI.APIConnectionError) return 'connection';
  if (err instanceof OpenAI.APIError && typeof err.status === 'number') return String(err.status);
  return 'other';
}
