/**
 * Token-faithful trajectories: training uses the token ids the inference
 * server returned, never a re-rendering of the chat text.
 */

/** A function call the policy made through the OpenAI tools API; `arguments` is JSON text, as the API carries it. */
export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** A tool the policy may call (OpenAI tools API: a function with JSON Schema parameters). */
export interface ToolDefinition {
  type: 'function';
  function: { name: string; description: string; parameters: Record<string, unknown> };
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  content: string;
  /** An assistant turn's function calls (envs that offer tools). */
  tool_calls?: ToolCall[];
  /** A tool message: the call it answers. */
  tool_call_id?: string;
}

/** One assistant turn as the server produced it (vLLM: return_token_ids + logprobs). */
export interface TurnTokens {
  promptTokenIds: number[];
  tokenIds: number[];
  logprobs: number[];
}

/** One training sequence: prompt, then response tokens with mask 1 (model) or 0 (observation). */
export interface TokenSample {
  promptIds: number[];
  responseIds: number[];
  responseMask: number[];
  /** Sampling log-probs per response token; 0 where the mask is 0. */
  responseLogprobs: number[];
}

/**
 * Where the harness, not the policy or the env, shaped the conversation: its
 * system prompt (context, injected docs), actions it took itself, an action
 * it repaired or refused, and what it added to or cut from an observation.
 * `message` is the index, in the trajectory's messages, of the message it marks.
 */
export interface HarnessIntervention {
  message: number;
  kind: 'context' | 'scaffold' | 'repair' | 'refusal' | 'observation';
  /** What the harness did: the text it added, the action before and after a repair, the feedback of a refusal. */
  detail: string;
}

export type FailureType = 'format_error' | 'execution_error' | 'wrong_answer' | 'turn_limit' | 'policy_error';

export interface Trajectory {
  taskId: string;
  taskKind: string;
  harnessId: string;
  sample: number;
  policyVersion: string;
  messages: ChatMessage[];
  samples: TokenSample[];
  reward: number;
  success: boolean;
  failureType: FailureType | null;
  turns: number;
  /** Tokens of the training samples (prompt and response, once each). */
  tokens: number;
  /** What the inference server processed, summed over the turns: each turn's whole prompt, and its completion. */
  promptTokens: number;
  completionTokens: number;
  latencyMs: number;
  /** What the harness did to the conversation (absent from trajectories made before it was recorded). */
  interventions?: HarnessIntervention[];
}

function startsWith(sequence: readonly number[], prefix: readonly number[]): boolean {
  if (prefix.length > sequence.length) return false;
  for (let i = 0; i < prefix.length; i++) if (sequence[i] !== prefix[i]) return false;
  return true;
}

/**
 * Assembles training samples from the turns: one sample when every turn's
 * prompt extends the previous prompt plus its completion (observation tokens in
 * between get mask 0), else one sample per turn.
 */
export function assembleTokenSamples(turns: readonly TurnTokens[]): TokenSample[] {
  if (turns.length === 0) return [];
  const extends_ = turns.every((turn, i) => {
    if (i === 0) return true;
    const previous = turns[i - 1];
    return startsWith(turn.promptTokenIds, [...previous.promptTokenIds, ...previous.tokenIds]);
  });
  if (!extends_) {
    return turns.map((turn) => ({
      promptIds: turn.promptTokenIds,
      responseIds: turn.tokenIds,
      responseMask: turn.tokenIds.map(() => 1),
      responseLogprobs: turn.logprobs,
    }));
  }
  const sample: TokenSample = { promptIds: turns[0].promptTokenIds, responseIds: [], responseMask: [], responseLogprobs: [] };
  turns.forEach((turn, i) => {
    if (i > 0) {
      const seen = turns[i - 1].promptTokenIds.length + turns[i - 1].tokenIds.length;
      const observation = turn.promptTokenIds.slice(seen);
      sample.responseIds.push(...observation);
      sample.responseMask.push(...observation.map(() => 0));
      sample.responseLogprobs.push(...observation.map(() => 0));
    }
    sample.responseIds.push(...turn.tokenIds);
    sample.responseMask.push(...turn.tokenIds.map(() => 1));
    sample.responseLogprobs.push(...turn.logprobs);
  });
  return [sample];
}
