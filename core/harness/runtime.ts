/**
 * The harness runtime: one agent loop for every environment and harness.
 * It records each assistant turn's exact tokens so training never re-tokenizes.
 */
import type { Environment, Episode, StepOutcome } from './environment';
import type { Policy, PolicyReply } from '../policy/client';
import {
  assembleTokenSamples,
  type ChatMessage,
  type HarnessIntervention,
  type ToolCall,
  type ToolDefinition,
  type Trajectory,
  type TurnTokens,
} from '../policy/trajectory';
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

/** How an episode ended: its reward, whether it succeeded, and why not. */
type EpisodeOutcome = Pick<Trajectory, 'reward' | 'success' | 'failureType'>;

/** The outcome of an env step that ended the episode. */
function endedBy(result: StepOutcome): EpisodeOutcome {
  return { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.failureType ?? null };
}

const ONE_CALL_PER_TURN = 'Not run: one tool call per turn; only the first call of a turn runs.';

/**
 * Runs one episode of `request.taskId` under `request.harness`: the opening
 * turns, then policy turns until the env ends the episode or the turn budget
 * is spent, then the ending. The episode is closed whatever happens.
 */
export async function runEpisode(request: EpisodeRequest): Promise<Trajectory> {
  const { env, harness } = request;
  const started = Date.now();
  const budget = harness.turnBudget(request.maxTurns);
  const episode = await env.startEpisode(request.taskId, { maxTurns: budget, signal: request.signal });
  const loop = new EpisodeLoop(request, episode, budget);
  let outcome: EpisodeOutcome | undefined;
  // From here on the episode is closed whatever happens (its workspace, its server).
  try {
    outcome = await loop.play();
  } finally {
    await episode.close();
  }
  // Out of turns without an ending from the env (e.g. the last turns were refused by the harness).
  outcome ??= { reward: 0, success: false, failureType: 'turn_limit' };
  return trajectoryOf(request, episode, loop, outcome, started);
}

/** The conversation, the policy's turns and the env actions of one episode, played turn by turn. */
class EpisodeLoop {
  readonly turns: TurnTokens[] = [];
  readonly messages: ChatMessage[] = [];
  /** What the harness did to the conversation, marked on the messages it shaped. */
  readonly interventions: HarnessIntervention[] = [];
  private readonly actions: string[] = [];
  private lastObservationKind: TurnContext['lastObservationKind'] = null;
  private tools: ToolDefinition[] | undefined;
  /** The env's answer to a turn: a tool message for the turn's first call, a user message for a text turn. */
  private answering: ToolCall | undefined;

  constructor(
    private readonly request: EpisodeRequest,
    private readonly episode: Episode,
    private readonly budget: number,
  ) {}

  /** The whole loop: the outcome, or none when the turns ran out and the env has no ending of its own. */
  async play(): Promise<EpisodeOutcome | undefined> {
    let outcome = await this.open();
    while (!outcome && this.turns.length < this.budget) outcome = await this.playTurn();
    return outcome ?? this.endOutOfTurns();
  }

  /** The opening turns: the harness's system prompt, the env's opening, the harness's scaffold actions (which may end the episode). */
  private async open(): Promise<EpisodeOutcome | undefined> {
    const { harness } = this.request;
    const { episode, messages } = this;
    const systemPrompt = harness.systemPrompt(episode.task);
    if (systemPrompt) {
      this.intervene('context', `system prompt of harness ${harness.id}`);
      messages.push({ role: 'system', content: systemPrompt });
    }
    messages.push(...(episode.opening?.() ?? [{ role: 'user' as const, content: episode.instruction() }]));
    this.tools = episode.tools?.();
    for (const action of harness.scaffoldActions(episode.task)) {
      const result = await episode.step(action, { byHarness: true });
      this.intervene('scaffold', action);
      messages.push({ role: 'user', content: result.observation });
      if (result.done) return endedBy(result);
    }
    return undefined;
  }

  /** One policy turn: ask the policy, realize its action through the harness, step the env, record the answer. */
  private async playTurn(): Promise<EpisodeOutcome | undefined> {
    this.request.signal?.throwIfAborted();
    const reply = await this.askPolicy();
    const calls = this.tools ? (reply.toolCalls ?? []) : [];
    this.messages.push(
      calls.length ? { role: 'assistant', content: reply.content, tool_calls: calls } : { role: 'assistant', content: reply.content },
    );
    // One action per turn: the first call runs; the API wants every call answered, so the others are told so.
    this.answering = calls[0];
    const text = this.answering ? toolCallAction(this.answering) : reply.content;
    const realized = this.request.harness.realizeAction(text, this.context());
    if (realized.ok && realized.repaired) this.intervene('repair', `${text}\n→ ${realized.action}`, this.messages.length - 1);
    const outcome = realized.ok ? await this.act(realized.action) : this.refuse(realized);
    for (const call of calls.slice(1)) this.messages.push({ role: 'tool', tool_call_id: call.id, content: ONE_CALL_PER_TURN });
    return outcome;
  }

  /** Samples the policy's next turn (seeded by the episode's seed and the turn) and keeps its tokens. */
  private async askPolicy(): Promise<PolicyReply> {
    const { request } = this;
    const reply = await request.policy.complete({
      model: request.model,
      messages: this.messages,
      temperature: request.temperature,
      seed: hashSeed(request.seed, this.turns.length),
      maxTokens: request.maxTokens,
      tools: this.tools,
    });
    this.turns.push(reply);
    return reply;
  }

  /** Steps the env with the realized action and shows the policy the shaped observation; the outcome when the env ends the episode. */
  private async act(action: string): Promise<EpisodeOutcome | undefined> {
    const result = await this.episode.step(action);
    // An episode cancelled while its action ran ends here, not with what the cut-short action returned.
    this.request.signal?.throwIfAborted();
    this.actions.push(action);
    this.lastObservationKind = result.kind ?? 'ok';
    this.observeShaped(result.observation);
    return result.done ? endedBy(result) : undefined;
  }

  /** An action the harness refused: with feedback the turn is spent and the episode goes on; otherwise it ends as a format error. */
  private refuse(refused: { error: string; retry: boolean }): EpisodeOutcome | undefined {
    if (refused.retry) {
      this.lastObservationKind = 'error';
      this.intervene('refusal', refused.error);
      this.observeShaped(refused.error);
      return undefined;
    }
    this.intervene('refusal', refused.error);
    this.observe(`Observation: format error (${refused.error})`);
    return { reward: 0, success: false, failureType: 'format_error' };
  }

  /** The env's scoring of what was done when the turns ran out, for envs that score it; kept with the trajectory (no policy turn follows it). */
  private async endOutOfTurns(): Promise<EpisodeOutcome | undefined> {
    const { episode } = this;
    if (!episode.outOfTurns) return undefined;
    this.request.signal?.throwIfAborted();
    const result = await episode.outOfTurns();
    this.request.signal?.throwIfAborted();
    this.messages.push({ role: 'user', content: result.observation });
    return { reward: result.reward ?? 0, success: result.success ?? false, failureType: result.success ? null : 'turn_limit' };
  }

  /** Shows the policy an observation as the harness shapes it, marking what the harness added or cut. */
  private observeShaped(observation: string): void {
    const shaped = this.request.harness.shapeObservation(observation, this.context());
    if (shaped !== observation) {
      const added = shaped.startsWith(observation) ? shaped.slice(observation.length).trim() : null;
      this.intervene('observation', added ?? `cut from ${observation.length} to ${shaped.length} characters`);
    }
    this.observe(shaped);
  }

  /** Marks a message (by default the next one) as shaped by the harness. */
  private intervene(kind: HarnessIntervention['kind'], detail: string, message = this.messages.length): void {
    this.interventions.push({ message, kind, detail });
  }

  /** Records the env's answer to the turn: a tool message for the turn's call, a user message for a text turn. */
  private observe(content: string): void {
    this.messages.push(this.answering ? { role: 'tool', tool_call_id: this.answering.id, content } : { role: 'user', content });
    this.answering = undefined;
  }

  /** What the harness sees of the turn being handled. */
  private context(): TurnContext {
    return { turn: this.turns.length, budget: this.budget, previousActions: this.actions, lastObservationKind: this.lastObservationKind };
  }
}

/** The trajectory of a played episode; an endpoint without token ids (evaluation only) leaves no samples to train on. */
function trajectoryOf(request: EpisodeRequest, episode: Episode, loop: EpisodeLoop, outcome: EpisodeOutcome, started: number): Trajectory {
  const samples = assembleTokenSamples(loop.turns.filter((t) => t.tokenIds.length > 0));
  return {
    taskId: episode.task.taskId,
    taskKind: episode.task.kind,
    harnessId: request.harness.id,
    sample: request.sample,
    policyVersion: request.model,
    messages: loop.messages,
    samples,
    ...outcome,
    turns: loop.turns.length,
    tokens: samples.reduce((n, s) => n + s.promptIds.length + s.responseIds.length, 0),
    promptTokens: loop.turns.reduce((n, t) => n + t.promptTokenIds.length, 0),
    completionTokens: loop.turns.reduce((n, t) => n + t.tokenIds.length, 0),
    latencyMs: Date.now() - started,
    interventions: loop.interventions,
  };
}
