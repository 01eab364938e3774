/**
 * Propose: what a proposer LLM is asked, and how its answer becomes a
 * candidate or a refusal.
 *
 * The request is a system message (the job) and one user message ending in a
 * fenced ```json proposal-request block: the env, the direction and what it
 * means, the parent spec, the spec's JSON Schema, the fields the direction may
 * change, a bounded sample of the base's failing trajectories (each turn cut
 * to a bounded length), and, from the second round on, the parent's measured
 * results. The answer's last ```json block holds {"spec": {...}} (a whole
 * spec) or {"patch": {...}} (a JSON merge patch of the parent, RFC 7386). The
 * workflow sets the candidate's id and parent; its direction must be the one
 * asked for (a patch is applied to the parent in that direction), it must change something, and only fields its direction owns
 * (core/evolution/harness-space.ts). A refused answer goes back with the
 * reason, up to `proposalRetries` times.
 */
import type { ChatMessage } from '../policy/trajectory';
import { DIRECTION_MEANING, type SiblingDirection } from './failure-directions';
import type { HarnessSpace } from './harness-space';

export const REQUEST_FENCE = '```json proposal-request';
export const REFUSAL_PREFIX = 'Your answer was refused:';

export interface FailureExample {
  taskId: string;
  kind: string;
  failureType: string;
  turns: ChatMessage[];
}

export interface ParentResults {
  targetRescueRate: number;
  baseRateOnTargets: number;
  regressionRate: number;
  byKind: Record<string, number>;
}

export interface ProposalRequest {
  env: string;
  direction: SiblingDirection;
  directionMeaning: string;
  round: number;
  slot: number;
  parent: Record<string, unknown>;
  specSchema: unknown;
  mayChange: string[];
  envFacts: Record<string, unknown>;
  failures: FailureExample[];
  parentResults: ParentResults | null;
}

const SYSTEM_PROMPT = [
  'You evolve agent harnesses: the scaffold around a policy LLM (its prompt additions, hints, action repairs, observation notes, turn budget).',
  'You get a parent harness spec, one repair direction, and trajectories where the policy failed under the base harness.',
  'Propose ONE child harness that repairs those failures along that direction only.',
  'Answer with a short rationale, then one ```json block holding either {"spec": <the whole child spec>} or {"patch": <a JSON merge patch of the parent>}.',
  'Keep "direction" as asked; change only the fields listed under mayChange (description and targets may always change).',
].join('\n');

/** Cuts a failing trajectory to what a prompt can hold: the system prompt dropped, the last `maxTurns` turns, each to `turnChars`. */
export function truncateTurns(messages: readonly ChatMessage[], turnChars: number, maxTurns = 12): ChatMessage[] {
  const turns = messages.filter((m) => m.role !== 'system');
  const kept = turns.slice(-maxTurns);
  // A turn made of function calls (SWE) shows its calls, or the proposer would see empty turns.
  const text = (m: ChatMessage) =>
    [m.content, ...(m.tool_calls ?? []).map((c) => `${c.function.name}(${c.function.arguments})`)].filter(Boolean).join('\n');
  return kept.map((m) => {
    const content = text(m);
    return { role: m.role, content: content.length > turnChars ? `${content.slice(0, turnChars)} [TRUNCATED]` : content };
  });
}

export function buildProposalRequest(args: {
  space: HarnessSpace;
  direction: SiblingDirection;
  round: number;
  slot: number;
  parent: Record<string, unknown>;
  failures: FailureExample[];
  parentResults: ParentResults | null;
}): ProposalRequest {
  return {
    env: args.space.env,
    direction: args.direction,
    directionMeaning: DIRECTION_MEANING[args.direction],
    round: args.round,
    slot: args.slot,
    parent: args.parent,
    specSchema: args.space.jsonSchema(),
    mayChange: args.space.mayChange[args.direction],
    envFacts: args.space.envFacts,
    failures: args.failures,
    parentResults: args.parentResults,
  };
}

/** The first messages of a proposal: the job and the request. */
export function proposalMessages(request: ProposalRequest): ChatMessage[] {
  const intro =
    `Propose candidate ${request.slot} of round ${request.round} for direction ${request.direction} (env ${request.env}). ` +
    `${request.directionMeaning} ${request.failures.length} failing trajectories of the base harness follow in the request.` +
    (request.parentResults ? ' The parent was measured: its results are in parentResults; improve on it.' : '');
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: `${intro}\n\n${REQUEST_FENCE}\n${JSON.stringify(request, null, 1)}\n\`\`\`` },
  ];
}

/** The messages of the next attempt: the refused answer and why it was refused. */
export function refusalMessages(answer: string, reason: string): ChatMessage[] {
  return [
    { role: 'assistant', content: answer },
    {
      role: 'user',
      content: `${REFUSAL_PREFIX} ${reason}\nAnswer again with one \`\`\`json block holding {"spec": ...} or {"patch": ...}.`,
    },
  ];
}

export type ProposalVerdict =
  { verdict: 'accepted'; spec: Record<string, unknown> } | { verdict: 'invalid' | 'off_direction'; reason: string };

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** JSON merge patch (RFC 7386): null deletes a key, objects merge, anything else replaces. */
export function mergePatch(target: unknown, patch: unknown): unknown {
  if (!isObject(patch)) return patch;
  const result: Record<string, unknown> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = mergePatch(result[key], value);
  }
  return result;
}

/** The JSON of an answer: its last ```json block, or the whole answer when it is JSON. */
export function answerJson(answer: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  const blocks = [...answer.matchAll(/```json[^\n]*\n([\s\S]*?)```/g)].map((m) => m[1]);
  const text = blocks.length > 0 ? blocks[blocks.length - 1] : answer.trim();
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (err) {
    return {
      ok: false,
      reason:
        blocks.length > 0 ? `the last \`\`\`json block is not valid JSON: ${(err as Error).message}` : 'the answer holds no ```json block',
    };
  }
}

function valueAt(root: unknown, dotted: string): unknown {
  return dotted.split('.').reduce<unknown>((node, key) => (isObject(node) ? node[key] : undefined), root);
}

type Refusal = Exclude<ProposalVerdict, { verdict: 'accepted' }>;

interface JudgedArgs {
  space: HarnessSpace;
  direction: SiblingDirection;
  parent: Record<string, unknown>;
  candidateId: string;
  parentId: string;
}

/**
 * Judges an answer: the candidate spec it yields (with the id and parent the
 * workflow gives it), or why it is refused.
 */
export function judgeAnswer(args: JudgedArgs & { answer: string }): ProposalVerdict {
  const proposed = proposedSpec(args.answer, args.parent, args.direction);
  if (!proposed.ok) return proposed.refusal;
  const checked = args.space.check({ ...proposed.spec, id: args.candidateId, parent: args.parentId });
  if (!checked.ok) return { verdict: 'invalid', reason: `the spec is invalid:\n${checked.error}` };
  return directionRefusal(args, checked.spec) ?? { verdict: 'accepted', spec: checked.spec };
}

/** Reads the spec an answer proposes: its whole spec, or its merge patch applied to the parent; a refusal when the answer has neither shape. */
function proposedSpec(
  answer: string,
  parent: Record<string, unknown>,
  direction: SiblingDirection,
): { ok: true; spec: Record<string, unknown> } | { ok: false; refusal: Refusal } {
  const refuse = (reason: string) => ({ ok: false as const, refusal: { verdict: 'invalid' as const, reason } });
  const json = answerJson(answer);
  if (!json.ok) return refuse(json.reason);
  if (!isObject(json.value)) return refuse('the JSON answer must be an object: {"spec": ...} or {"patch": ...}');
  const value = json.value;
  if ('patch' in value && !isObject(value.patch)) {
    return refuse('patch must be a JSON object: a JSON merge patch of the parent (RFC 7386), not a list of operations or a string');
  }
  if ('spec' in value && !isObject(value.spec)) return refuse('spec must be a JSON object: the whole harness spec');
  // A patch starts from the parent in the asked direction (a patch of the base would otherwise keep 'base').
  const proposed = isObject(value.patch) ? mergePatch({ ...parent, direction }, value.patch) : isObject(value.spec) ? value.spec : value;
  if (!isObject(proposed)) return refuse('the spec must be a JSON object');
  return { ok: true, spec: proposed };
}

/** Checks a valid spec against its direction: the direction asked for, only fields it owns, its own rules, and some change; null when it passes. */
function directionRefusal(args: JudgedArgs, spec: Record<string, unknown>): Refusal | null {
  const { space, direction } = args;
  if (spec.direction !== direction) {
    return { verdict: 'off_direction', reason: `direction is '${String(spec.direction)}', but this candidate must be '${direction}'` };
  }
  const parent = checkedParent(args);
  const changed = space.fields.filter((f) => JSON.stringify(valueAt(spec, f)) !== JSON.stringify(valueAt(parent, f)));
  const allowed = new Set([...space.mayChange[direction], 'description', 'targets']);
  const outside = changed.filter((f) => !allowed.has(f));
  if (outside.length > 0) {
    return {
      verdict: 'off_direction',
      reason: `it changes ${outside.join(', ')}, which ${direction} may not change (it may change: ${space.mayChange[direction].join(', ')})`,
    };
  }
  const problem = space.directionProblem(direction, spec, parent);
  if (problem) return { verdict: 'off_direction', reason: problem };
  if (changed.every((f) => f === 'description' || f === 'targets')) {
    return {
      verdict: 'invalid',
      reason: `it changes nothing of its parent besides description and targets (change some of: ${space.mayChange[direction].join(', ')})`,
    };
  }
  return null;
}

/** The parent as the candidate's check would read it (its defaults filled in, so they do not count as changes); as given when it does not check. */
function checkedParent(args: JudgedArgs): Record<string, unknown> {
  const parsed = args.space.check({ ...args.parent, id: args.candidateId, parent: args.parentId, direction: args.direction });
  return parsed.ok ? parsed.spec : args.parent;
}
