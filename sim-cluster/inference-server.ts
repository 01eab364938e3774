/**
 * The SIMULATED inference server: the subset of vLLM's OpenAI-compatible API
 * the project uses (chat completions with logprobs and token ids, completions
 * of token-id prompts with prompt_logprobs, models, runtime LoRA loading),
 * answering with the sim policy; model `sim-proposer` is the SIMULATED
 * harness proposer (core/envs/sim/proposer.ts). Errors have vLLM's shape,
 * `{"error": {"message", "type", "param", "code"}}`.
 *
 * A "LoRA adapter" is a local directory, as vLLM wants: the sim trainer's
 * sampler checkpoint unpacked. Loaded adapters are recorded in the data
 * directory; a restart forgets them, as vLLM forgets runtime adapters, unless
 * `keepAdapters` loads the recorded ones again at start.
 */
import { randomUUID } from 'node:crypto';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import { type GeneratedToken, type PolicyParams, SimPolicyInputError, SimPolicyModel, seededRandom } from '../core/envs/sim/policy-model';
import { SIM_PROPOSER_MODEL, simProposal } from '../core/envs/sim/proposer';
import { type ChatMessage, END } from '../core/envs/sim/tokenizer';
import type { SimWorld } from '../core/envs/sim/world';
import { formatZodError } from '../core/zod-errors';
import { SamplerWeightsRecord, SIM_ADAPTER_PARAMS_FILE, type SimClusterStore } from './checkpoints';
import type { SimApi, SimHttpReply, SimHttpRequest } from './http';
import type { LatencyModel } from './latency';

const TextPart = z.object({ type: z.literal('text'), text: z.string() });

const ChatMessageBody = z.object({
  role: z.enum(['system', 'user', 'assistant']),
  content: z.union([z.string(), z.array(TextPart), z.null()]).optional(),
});

/** Unknown fields are ignored, as vLLM does. */
const ChatCompletionBody = z
  .object({
    model: z.string(),
    messages: z.array(ChatMessageBody).min(1),
    temperature: z.number().min(0).nullish(),
    max_tokens: z.number().int().min(1).nullish(),
    max_completion_tokens: z.number().int().min(1).nullish(),
    seed: z.number().int().nullish(),
    logprobs: z.boolean().nullish(),
    top_logprobs: z.number().int().min(0).max(20).nullish(),
    n: z.number().int().nullish(),
    stream: z.boolean().nullish(),
    return_token_ids: z.boolean().nullish(),
  })
  .superRefine((body, ctx) => {
    if (body.n != null && body.n !== 1) {
      ctx.addIssue({ code: 'custom', path: ['n'], message: 'the sim server returns one choice per request; use n=1' });
    }
    if (body.stream) ctx.addIssue({ code: 'custom', path: ['stream'], message: 'streaming is not supported by the sim server' });
    if ((body.top_logprobs ?? 0) > 0 && !body.logprobs) {
      ctx.addIssue({ code: 'custom', path: ['top_logprobs'], message: 'top_logprobs needs logprobs=true' });
    }
  });
type ChatCompletionBody = z.infer<typeof ChatCompletionBody>;

/** vLLM's /v1/completions, for token-id prompts (what the adapter probe sends). */
const CompletionBody = z
  .object({
    model: z.string(),
    prompt: z.array(z.number().int()).min(1, 'the sim server takes a non-empty token-id prompt'),
    max_tokens: z.number().int().min(0).nullish(),
    temperature: z.number().min(0).nullish(),
    seed: z.number().int().nullish(),
    prompt_logprobs: z.number().int().min(0).nullish(),
    logprobs: z.number().int().min(0).nullish(),
    n: z.number().int().nullish(),
    stream: z.boolean().nullish(),
    return_token_ids: z.boolean().nullish(),
  })
  .superRefine((body, ctx) => {
    if (body.n != null && body.n !== 1)
      ctx.addIssue({ code: 'custom', path: ['n'], message: 'the sim server returns one choice per request; use n=1' });
    if (body.stream) ctx.addIssue({ code: 'custom', path: ['stream'], message: 'streaming is not supported by the sim server' });
  });

/** vLLM reports log-probs below this (impossible tokens) as this. */
const MIN_LOGPROB = -9999;

const LoadLoraBody = z.object({ lora_name: z.string().min(1), lora_path: z.string().min(1), load_inplace: z.boolean().nullish() });
const UnloadLoraBody = z.object({ lora_name: z.string().min(1) });

interface LoadedAdapter {
  path: string;
  params: PolicyParams;
  loadedAt: number;
}

export interface SimInferenceServerDeps {
  world: SimWorld;
  store: SimClusterStore;
  logger: Logger;
  /** SIMULATED GPU time for completions and adapter loads; none (answers at CPU speed) when absent. */
  latency?: LatencyModel;
  /** Load again the adapters recorded before a restart; false forgets them, as vLLM does. */
  keepAdapters: boolean;
}

export class SimInferenceServer implements SimApi {
  private readonly model: SimPolicyModel;
  private readonly baseParams: PolicyParams;
  private readonly adapters = new Map<string, LoadedAdapter>();
  private readonly startedAt = unixSeconds();
  /** Load/unload run one at a time, so the check-then-load and the registry file never interleave. */
  private adapterOps: Promise<unknown> = Promise.resolve();

  private constructor(private readonly deps: SimInferenceServerDeps) {
    this.model = new SimPolicyModel(deps.world);
    this.baseParams = this.model.initialParams();
  }

  /**
   * Builds the server. The adapters loaded before a restart are forgotten (the
   * record is cleared, so a later start with keepAdapters does not bring them
   * back), or, with keepAdapters, loaded again.
   */
  static async open(deps: SimInferenceServerDeps): Promise<SimInferenceServer> {
    const server = new SimInferenceServer(deps);
    const recorded = await deps.store.readAdapters();
    if (!deps.keepAdapters) {
      if (Object.keys(recorded).length > 0) {
        await deps.store.writeAdapters({});
        deps.logger.info(
          { forgotten: Object.keys(recorded) },
          '[SIMULATED] forgot the LoRA adapters loaded before the restart, as vLLM does; clients load them again (keepAdapters would reload them)',
        );
      }
      return server;
    }
    for (const [name, path] of Object.entries(recorded)) {
      const params = await server.readSamplerParams(path);
      if (params) server.adapters.set(name, { path, params, loadedAt: unixSeconds() });
      else deps.logger.warn({ lora_name: name, lora_path: path }, '[SIMULATED] adapter weights are gone; not reloading it');
    }
    if (server.adapters.size > 0) deps.logger.info({ adapters: [...server.adapters.keys()] }, '[SIMULATED] reloaded LoRA adapters');
    return server;
  }

  async handle(request: SimHttpRequest): Promise<SimHttpReply> {
    const route = `${request.method} ${request.path}`;
    switch (route) {
      case 'GET /health':
        return { status: 200 };
      case 'GET /v1/models':
        return { status: 200, json: this.listModels() };
      case 'POST /v1/chat/completions':
        return this.timed(this.chatCompletion(request.body));
      case 'POST /v1/completions':
        return this.timed(this.completion(request.body));
      case 'POST /v1/load_lora_adapter':
        return this.serialised(() => this.loadAdapter(request.body));
      case 'POST /v1/unload_lora_adapter':
        return this.serialised(() => this.unloadAdapter(request.body));
      default:
        return KNOWN_PATHS.has(request.path)
          ? { status: 405, json: { detail: 'Method Not Allowed' } }
          : { status: 404, json: { detail: 'Not Found' } };
    }
  }

  badRequest(message: string): SimHttpReply {
    return vllmError(400, 'BadRequestError', message);
  }

  /**
   * A policy completion answered after the SIMULATED time the latency model
   * gives its token counts (the sim proposer stands for another LLM, and
   * errors are not timed); at once without the model.
   */
  private timed(reply: SimHttpReply): SimHttpReply | Promise<SimHttpReply> {
    const latency = this.deps.latency;
    if (!latency || reply.status !== 200) return reply;
    const body = reply.json as { model?: string; usage?: { prompt_tokens: number; completion_tokens: number } };
    if (body.model === SIM_PROPOSER_MODEL || !body.usage) return reply;
    return latency.completion(body.usage.prompt_tokens, body.usage.completion_tokens).then(() => reply);
  }

  private listModels() {
    const base = this.deps.world.model.name;
    const entry = (id: string, created: number, root: string, parent: string | null) => ({
      id,
      object: 'model',
      created,
      owned_by: 'sim',
      root,
      parent,
    });
    return {
      object: 'list',
      data: [
        entry(base, this.startedAt, base, null),
        entry(SIM_PROPOSER_MODEL, this.startedAt, SIM_PROPOSER_MODEL, null),
        ...[...this.adapters].map(([name, adapter]) => entry(name, adapter.loadedAt, adapter.path, base)),
      ],
    };
  }

  private chatCompletion(rawBody: unknown): SimHttpReply {
    const parsed = ChatCompletionBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('/v1/chat/completions', parsed.error));
    const body = parsed.data;
    if (body.model === SIM_PROPOSER_MODEL) return { status: 200, json: this.proposerCompletion(body) };
    const params = this.paramsOf(body.model);
    if (!params) return vllmError(404, 'NotFoundError', `The model \`${body.model}\` does not exist.`);

    const promptIds = this.model.tokenizer.renderPrompt(body.messages.map(toChatMessage));
    let generated: GeneratedToken[];
    try {
      generated = this.model.generate(params, promptIds, {
        temperature: body.temperature ?? 1,
        maxTokens: body.max_completion_tokens ?? body.max_tokens ?? Number.MAX_SAFE_INTEGER,
        random: body.seed != null ? seededRandom(body.seed, promptIds.length) : Math.random,
      });
    } catch (err) {
      if (err instanceof SimPolicyInputError) return this.badRequest(`messages: ${err.message}`);
      throw err;
    }
    return { status: 200, json: this.completionResponse(body, promptIds, generated) };
  }

  /** A completion of a token-id prompt; with `prompt_logprobs`, each prompt token's log-prob under the model (vLLM's form). */
  private completion(rawBody: unknown): SimHttpReply {
    const parsed = CompletionBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('/v1/completions', parsed.error));
    const body = parsed.data;
    const params = this.paramsOf(body.model);
    if (!params) return vllmError(404, 'NotFoundError', `The model \`${body.model}\` does not exist.`);
    const tokenizer = this.model.tokenizer;
    const bad = body.prompt.find((id) => !tokenizer.isValidId(id));
    if (bad !== undefined) return this.badRequest(`prompt: token id ${bad} is outside the sim vocabulary (size ${tokenizer.size})`);
    let generated: GeneratedToken[] = [];
    try {
      generated =
        (body.max_tokens ?? 16) > 0
          ? this.model.generate(params, body.prompt, {
              temperature: body.temperature ?? 1,
              maxTokens: body.max_tokens ?? 16,
              random: body.seed != null ? seededRandom(body.seed, body.prompt.length) : Math.random,
            })
          : [];
    } catch (err) {
      if (!(err instanceof SimPolicyInputError)) throw err;
    }
    const promptLogprobs =
      body.prompt_logprobs != null
        ? body.prompt.map((id, i) => {
            if (i === 0) return null;
            let logprob = -Infinity;
            try {
              logprob = this.model.logprobAndGrad(params, body.prompt.slice(0, i), id).logprob;
            } catch (err) {
              if (!(err instanceof SimPolicyInputError)) throw err;
            }
            return { [String(id)]: { logprob: Math.max(MIN_LOGPROB, logprob), rank: null, decoded_token: tokenizer.token(id) } };
          })
        : null;
    const endId = tokenizer.id(END);
    return {
      status: 200,
      json: {
        id: `cmpl-${randomUUID().replace(/-/g, '')}`,
        object: 'text_completion',
        created: unixSeconds(),
        model: body.model,
        choices: [
          {
            index: 0,
            text: tokenizer.decode(generated.map((t) => t.id).filter((id) => id !== endId)),
            finish_reason: generated.at(-1)?.id === endId ? 'stop' : 'length',
            logprobs:
              body.logprobs != null
                ? { token_logprobs: generated.map((t) => t.logprob), tokens: generated.map((t) => tokenizer.token(t.id)) }
                : null,
            token_ids: body.return_token_ids ? generated.map((t) => t.id) : null,
            prompt_logprobs: promptLogprobs,
            prompt_token_ids: body.return_token_ids ? body.prompt : null,
          },
        ],
        usage: {
          prompt_tokens: body.prompt.length,
          completion_tokens: generated.length,
          total_tokens: body.prompt.length + generated.length,
        },
      },
    };
  }

  /** The sim proposer's answer in the chat-completion shape; it has no tokens, so usage is a rough count (4 characters a token). */
  private proposerCompletion(body: ChatCompletionBody) {
    const messages = body.messages.map(toChatMessage);
    const proposal = simProposal(messages);
    this.deps.logger.info(
      proposal.kind === 'candidate'
        ? { model: body.model, outcome: proposal.kind, direction: proposal.spec.direction, move: proposal.move }
        : { model: body.model, outcome: proposal.kind, reason: proposal.reason },
      `[SIMULATED] sim proposer ${proposal.kind === 'candidate' ? 'proposed a harness' : 'declined'}`,
    );
    const promptTokens = roughTokenCount(messages.map((m) => m.content).join('\n'));
    const completionTokens = roughTokenCount(proposal.text);
    return {
      id: `chatcmpl-${randomUUID().replace(/-/g, '')}`,
      object: 'chat.completion',
      created: unixSeconds(),
      model: body.model,
      choices: [{ index: 0, message: { role: 'assistant', content: proposal.text }, finish_reason: 'stop', logprobs: null }],
      usage: { prompt_tokens: promptTokens, completion_tokens: completionTokens, total_tokens: promptTokens + completionTokens },
    };
  }

  private completionResponse(body: ChatCompletionBody, promptIds: number[], generated: GeneratedToken[]) {
    const tokenizer = this.model.tokenizer;
    const endId = tokenizer.id(END);
    const stopped = generated.at(-1)?.id === endId;
    const tokenIds = generated.map((t) => t.id);
    const topCount = body.top_logprobs ?? 0;
    const logprobEntry = (id: number, logprob: number) => {
      const token = tokenizer.token(id);
      return { token, logprob, bytes: [...Buffer.from(token, 'utf8')] };
    };
    return {
      id: `chatcmpl-${randomUUID().replace(/-/g, '')}`,
      object: 'chat.completion',
      created: unixSeconds(),
      model: body.model,
      choices: [
        {
          index: 0,
          message: { role: 'assistant', content: tokenizer.decode(tokenIds.filter((id) => id !== endId)) },
          finish_reason: stopped ? 'stop' : 'length',
          logprobs: body.logprobs
            ? {
                content: generated.map((t) => ({
                  ...logprobEntry(t.id, t.logprob),
                  top_logprobs: t.alternatives.slice(0, topCount).map((alt) => logprobEntry(alt.id, alt.logprob)),
                })),
              }
            : null,
          token_ids: body.return_token_ids ? tokenIds : undefined,
        },
      ],
      usage: { prompt_tokens: promptIds.length, completion_tokens: tokenIds.length, total_tokens: promptIds.length + tokenIds.length },
      prompt_token_ids: body.return_token_ids ? promptIds : undefined,
    };
  }

  private async loadAdapter(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = LoadLoraBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('/v1/load_lora_adapter', parsed.error));
    const { lora_name: name, lora_path: path, load_inplace: inplace } = parsed.data;
    if (name === this.deps.world.model.name) {
      return this.badRequest(`lora_name '${name}' is the base model's name; pick another adapter name`);
    }
    if (name === SIM_PROPOSER_MODEL) {
      return this.badRequest(`lora_name '${name}' is the SIMULATED proposer's name; pick another adapter name`);
    }
    if (this.adapters.has(name) && !inplace) {
      return vllmError(
        400,
        'InvalidUserInput',
        `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      );
    }
    const params = await this.readSamplerParams(path);
    if (!params) return vllmError(404, 'NotFoundError', `Loading lora ${name} failed: No adapter found for ${path}`);
    if (this.deps.latency) await this.deps.latency.adapterLoad();
    this.adapters.set(name, { path, params, loadedAt: unixSeconds() });
    await this.persistAdapters();
    this.deps.logger.info({ lora_name: name, lora_path: path }, '[SIMULATED] LoRA adapter loaded');
    return { status: 200, text: `Success: LoRA adapter '${name}' added successfully.` };
  }

  private async unloadAdapter(rawBody: unknown): Promise<SimHttpReply> {
    const parsed = UnloadLoraBody.safeParse(rawBody);
    if (!parsed.success) return this.badRequest(invalidBody('/v1/unload_lora_adapter', parsed.error));
    const name = parsed.data.lora_name;
    if (!this.adapters.delete(name)) return vllmError(404, 'NotFoundError', `The lora adapter '${name}' cannot be found.`);
    await this.persistAdapters();
    this.deps.logger.info({ lora_name: name }, '[SIMULATED] LoRA adapter unloaded');
    return { status: 200, text: `Success: LoRA adapter '${name}' removed successfully.` };
  }

  private paramsOf(modelName: string): PolicyParams | undefined {
    return modelName === this.deps.world.model.name ? this.baseParams : this.adapters.get(modelName)?.params;
  }

  /** The sim parameters of an adapter directory (an unpacked sampler checkpoint), or undefined when it has none. */
  private async readSamplerParams(dir: string): Promise<PolicyParams | undefined> {
    if (!path.isAbsolute(dir)) return undefined;
    const text = await fs.readFile(path.join(dir, SIM_ADAPTER_PARAMS_FILE), 'utf8').catch(() => undefined);
    if (text === undefined) return undefined;
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch {
      return undefined;
    }
    const parsed = SamplerWeightsRecord.safeParse(raw);
    if (!parsed.success) {
      this.deps.logger.warn({ dir, problems: formatZodError(parsed.error) }, '[SIMULATED] adapter directory holds no valid sim parameters');
      return undefined;
    }
    return parsed.data.params;
  }

  private persistAdapters(): Promise<void> {
    return this.deps.store.writeAdapters(Object.fromEntries([...this.adapters].map(([name, a]) => [name, a.path])));
  }

  private serialised(op: () => Promise<SimHttpReply>): Promise<SimHttpReply> {
    const result = this.adapterOps.then(op);
    this.adapterOps = result.catch(() => undefined);
    return result;
  }
}

const KNOWN_PATHS = new Set([
  '/health',
  '/v1/models',
  '/v1/chat/completions',
  '/v1/completions',
  '/v1/load_lora_adapter',
  '/v1/unload_lora_adapter',
]);

export function vllmError(status: number, type: string, message: string): SimHttpReply {
  return { status, json: { error: { message, type, param: null, code: status } } };
}

function invalidBody(route: string, error: z.ZodError): string {
  return `invalid request body for ${route}:\n${formatZodError(error)}`;
}

function toChatMessage(message: z.infer<typeof ChatMessageBody>): ChatMessage {
  const content = message.content ?? '';
  return { role: message.role, content: typeof content === 'string' ? content : content.map((p) => p.text).join('\n') };
}

function roughTokenCount(text: string): number {
  return Math.ceil(text.length / 4);
}

function unixSeconds(): number {
  return Math.floor(Date.now() / 1000);
}
