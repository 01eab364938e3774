/**
 * The harness runtime: one agent loop for every environment and harness.
 * It records each assistant turn's exact tokens so training never re-tokenizes.
 */
import type { Environment } from '../envs/environment';
import type { Policy } from '../policy/client';
import { assembleTokenSamples, type ChatMessage, type Trajectory, type TurnTokens } from '../policy/trajectory';
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
}

export async function runEpisode(request: EpisodeRequest): Promise<Trajectory> {
  const { env, harness, policy } = request;
  const started = Date.now();
  const episode = await env.startEpisode(request.taskId, { maxTurns: harness.turnBudget(request.maxTurns) });
  const turns: TurnTokens[] = [];
  const systemPrompt = harness.systemPrompt(episode.task);
  const messages: ChatMessage[] = [
    ...(systemPrompt ? [{ role: 'system' as const, content: systemPrompt }] : []),
    ...(episode.opening?.() ?? [{ role: 'user' as const, content: episode.instruction() }]),
  ];
  const budget = harness.turnBudget(request.maxTurns);
  const actions: string[] = [];
  let lastObservationKind: TurnContext['lastObservationKind'] = null;
  const context = (): TurnContext => ({ turn: turns.length, budget, previousActions: actions, lastObservationKind });
  let outcome: { reward: number; success: boolean; failureType: Trajectory['failureType'] } | undefined;
  try {
    for (const action of harness.scaffoldActions(episode.task)) {
      const result = await episode.step(action, { byHarness: true });
      messages.push({ role: 'user', content: result.observation });
      if (result.done) {
        outcome = { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.failureType ?? null };
        break;
      }
    }
    while (!outcome && turns.length < budget) {
      const reply = await policy.complete({
        model: request.model,
        messages,
        temperature: request.temperature,
        seed: hashSeed(request.seed, turns.length),
        maxTokens: request.maxTokens,
      });
      turns.push(reply);
      messages.push({ role: 'assistant', content: reply.content });
      const realized = harness.realizeAction(reply.content, context());
      if (!realized.ok && realized.retry) {
        // Refused with feedback: the turn is spent, the episode goes on.
        lastObservationKind = 'error';
        messages.push({ role: 'user', content: harness.shapeObservation(realized.error, context()) });
        continue;
      }
      if (!realized.ok) {
        messages.push({ role: 'user', content: `Observation: format error (${realized.error})` });
        outcome = { reward: 0, success: false, failureType: 'format_error' };
        break;
      }
      const result = await episode.step(realized.action);
      actions.push(realized.action);
      lastObservationKind = result.kind ?? 'ok';
      messages.push({ role: 'user', content: harness.shapeObservation(result.observation, context()) });
      if (result.done) {
        outcome = { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.failureType ?? null };
      }
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
