/**
 * The harness runtime: one agent loop for every environment and harness.
 * It records each assistant turn's exact tokens so training never re-tokenizes.
 */
import type { Environment } from '../envs/environment';
import type { Policy } from '../policy/client';
import { assembleTokenSamples, type ChatMessage, type ToolCall, type ToolDefinition, type Trajectory, type TurnTokens } from '../policy/trajectory';
import { hashSeed } from '../random';
import type { Harness, TurnContext } from './harness';

export interface EpisodeRequest {
  env: Environment;
  harness: Harness;
  policy: Policy;
  /** The model (or LoRA adapter) name to sample from: the policy version. */
  model: string;
  taskId: string;
  sample: number;
  maxTurns: number;
  /** Tokens per assistant turn; the server's limit when absent. */
  maxTokens?: number;
  temperature: number;
  /** Seeds each turn's sampling, so a rollout is reproducible from (seed, turn). */
  seed: number;
  /** Aborts the episode between turns (and the env's running commands, where it has any). */
  signal?: AbortSignal;
}

/**
 * A tool call as the env's action text: `{"tool": name, "arguments": {...}}`
 * (arguments that are not a JSON object are kept as their text, for the env
 * to refuse with a clear message).
 */
export function toolCallAction(call: ToolCall): string {
  let args: unknown = call.function.arguments;
  try {
    args = JSON.parse(call.function.arguments);
  } catch {
    // kept as text
  }
  return JSON.stringify({ tool: call.function.name, arguments: args });
}

export async function runEpisode(request: EpisodeRequest): Promise<Trajectory> {
  const { env, harness, policy } = request;
  const started = Date.now();
  const episode = await env.startEpisode(request.taskId, { maxTurns: harness.turnBudget(request.maxTurns), signal: request.signal });
  const turns: TurnTokens[] = [];
  const messages: ChatMessage[] = [];
  const budget = harness.turnBudget(request.maxTurns);
  const actions: string[] = [];
  let lastObservationKind: TurnContext['lastObservationKind'] = null;
  const context = (): TurnContext => ({ turn: turns.length, budget, previousActions: actions, lastObservationKind });
  let outcome: { reward: number; success: boolean; failureType: Trajectory['failureType'] } | undefined;
  let tools: ToolDefinition[] | undefined;
  /** The env's answer to a turn: a tool message for the turn's first call, a user message for a text turn. */
  let answering: ToolCall | undefined;
  const observe = (content: string) => {
    messages.push(answering ? { role: 'tool', tool_call_id: answering.id, content } : { role: 'user', content });
    answering = undefined;
  };
  // From here on the episode is closed whatever happens (its workspace, its server).
  try {
    const systemPrompt = harness.systemPrompt(episode.task);
    if (systemPrompt) messages.push({ role: 'system', content: systemPrompt });
    messages.push(...(episode.opening?.() ?? [{ role: 'user' as const, content: episode.instruction() }]));
    tools = episode.tools?.();
    for (const action of harness.scaffoldActions(episode.task)) {
      const result = await episode.step(action, { byHarness: true });
      messages.push({ role: 'user', content: result.observation });
      if (result.done) {
        outcome = { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.failureType ?? null };
        break;
      }
    }
    while (!outcome && turns.length < budget) {
      request.signal?.throwIfAborted();
      const reply = await policy.complete({
        model: request.model,
        messages,
        temperature: request.temperature,
        seed: hashSeed(request.seed, turns.length),
        maxTokens: request.maxTokens,
        tools,
      });
      turns.push(reply);
      const calls = tools ? (reply.toolCalls ?? []) : [];
      messages.push(calls.length ? { role: 'assistant', content: reply.content, tool_calls: calls } : { role: 'assistant', content: reply.content });
      // One action per turn: the first call runs; the API wants every call answered, so the others are told so.
      answering = calls[0];
      const unanswered = calls.slice(1);
      const text = answering ? toolCallAction(answering) : reply.content;
      const realized = harness.realizeAction(text, context());
      const answerRest = () => {
        for (const call of unanswered) messages.push({ role: 'tool', tool_call_id: call.id, content: 'Not run: one tool call per turn; only the first call of a turn runs.' });
      };
      if (!realized.ok && realized.retry) {
        // Refused with feedback: the turn is spent, the episode goes on.
        lastObservationKind = 'error';
        observe(harness.shapeObservation(realized.error, context()));
        answerRest();
        continue;
      }
      if (!realized.ok) {
        observe(`Observation: format error (${realized.error})`);
        answerRest();
        outcome = { reward: 0, success: false, failureType: 'format_error' };
        break;
      }
      const result = await episode.step(realized.action);
      // An episode cancelled while its action ran ends here, not with what the cut-short action returned.
      request.signal?.throwIfAborted();
      actions.push(realized.action);
      lastObservationKind = result.kind ?? 'ok';
      observe(harness.shapeObservation(result.observation, context()));
      answerRest();
      if (result.done) {
        outcome = { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.failureType ?? null };
      }
    }
    if (!outcome && episode.outOfTurns) {
      request.signal?.throwIfAborted();
      const result = await episode.outOfTurns();
      request.signal?.throwIfAborted();
      // Kept with the trajectory (what the scorer found); no policy turn follows it.
      messages.push({ role: 'user', content: result.observation });
      outcome = { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.success ? null : 'turn_limit' };
    }
  } finally {
    await episode.close();
  }
  // Out of turns without an ending from the env (e.g. the last turns were refused by the harness).
  outcome ??= { reward: 0, success: false, failureType: 'turn_limit' };
  // An endpoint without token ids (evaluation only) leaves nothing to train on.
  const samples = assembleTokenSamples(turns.filter((t) => t.tokenIds.length > 0));
  return {
    taskId: episode.task.taskId,
    taskKind: episode.task.kind,
    harnessId: harness.id,
    sample: request.sample,
    policyVersion: request.model,
    messages,
    samples,
    ...outcome,
    turns: turns.length,
    tokens: samples.reduce((n, s) => n + s.promptIds.length + s.responseIds.length, 0),
    latencyMs: Date.now() - started,
  };
}
