/**
 * The `vote` strategy: voter LLMs read a dead group's task, how the base
 * harness failed on it and each sibling's profile evidence, and each ranks the
 * siblings; a Borda count merges the ballots. Validation is kept for ties, so
 * the vote refines the default rule rather than replacing its evidence.
 * Asking the voters is I/O (an activity calls `collectVotes`); everything else
 * here is pure.
 */
import OpenAI, { APIConnectionError, APIConnectionTimeoutError, APIError } from 'openai';
import { z } from 'zod';
import { apiKeyOf } from '../secrets';
import type { VoterConfig } from '../config';
import { isThinCell, meanTurns, smoothedRescueRate, type BehaviorProfiles, type ProfileCell } from './profiles';
import type { DeadGroup } from './validation';

/** What a voter must answer: a JSON object {"ranking": [harness ids, best first]}. */
export const VoterBallot = z.object({
  ranking: z
    .array(z.string().min(1, 'a harness id may not be empty'))
    .min(1, 'list at least one harness id')
    .superRefine((ids, ctx) => {
      const repeated = [...new Set(ids.filter((id, i) => ids.indexOf(id) !== i))];
      if (repeated.length > 0)
        ctx.addIssue({ code: 'custom', message: `each harness id may appear once; repeated: ${repeated.join(', ')}` });
    }),
});
export type VoterBallot = z.infer<typeof VoterBallot>;

export interface VoteContext {
  taskId: string;
  kind: string;
  /** The task as the agent sees it (may be long; truncated in the prompt). */
  taskText: string;
  /** failureCounts: failure type -> count among the G base attempts. */
  group: DeadGroup;
  siblings: Array<{ id: string; direction: string; description: string }>;
  profiles: BehaviorProfiles;
  k: number;
}

export type VoteOutcome =
  { voter: string; ok: true; ranking: string[]; latencyMs: number } | { voter: string; ok: false; reason: string; latencyMs: number };

type BallotResult = { ok: true; ranking: string[] } | { ok: false; reason: string };

/** Long task texts would crowd out the evidence the voter is asked to weigh. */
const TASK_TEXT_LIMIT = 1500;

/** The group's failure types with their counts, most frequent first, then by name, so prompts are deterministic. */
function sortedFailures(group: DeadGroup): Array<[string, number]> {
  return Object.entries(group.failureCounts)
    .filter(([, count]) => count > 0)
    .sort(([a, countA], [b, countB]) => countB - countA || a.localeCompare(b));
}

/**
 * A short, human-readable summary of the base failures, e.g.
 * "8/8 base attempts failed: wrong_answer x5, turn_limit x3" (a dead group
 * failed every attempt, so the failures are the attempts). Sorted by count
 * descending, then by name; zero counts are left out.
 */
export function failureSummary(group: DeadGroup): string {
  const failures = sortedFailures(group);
  const total = failures.reduce((n, [, count]) => n + count, 0);
  if (total === 0) return 'no base failures recorded';
  return `${total}/${total} base attempts failed: ${failures.map(([type, count]) => `${type} x${count}`).join(', ')}`;
}

function truncateTaskText(text: string): string {
  if (text.length <= TASK_TEXT_LIMIT) return text;
  return `${text.slice(0, TASK_TEXT_LIMIT)}\n[... ${text.length - TASK_TEXT_LIMIT} more characters not shown]`;
}

/** One sibling's evidence for this task kind: per base failure type its smoothed rescue rate and attempts, then its cost. */
function siblingEvidence(profiles: BehaviorProfiles, harnessId: string, kind: string, failureTypes: readonly string[]): string[] {
  const lines = failureTypes.map((failureType) => {
    const rate = smoothedRescueRate(profiles, harnessId, kind, failureType).toFixed(2);
    const cell: ProfileCell = profiles.cells.find((c) => c.harnessId === harnessId && c.kind === kind && c.failureType === failureType) ?? {
      harnessId,
      kind,
      failureType,
      attempts: 0,
      successes: 0,
      totalTurns: 0,
      totalTokens: 0,
    };
    const thin =
      cell.attempts === 0 ? ' (untested: the prior alone)' : isThinCell(profiles, cell) ? ' (thin evidence: mostly the prior)' : '';
    return `after ${failureType}: rescue rate ${rate} over ${cell.attempts} ${cell.attempts === 1 ? 'attempt' : 'attempts'}${thin}`;
  });
  const turns = meanTurns(profiles, harnessId, kind);
  lines.push(Number.isFinite(turns) ? `mean turns on ${kind} tasks: ${turns.toFixed(1)}` : `mean turns on ${kind} tasks: not measured`);
  return lines;
}

/**
 * The chat messages every voter receives: a system message with the voter's
 * role and the exact answer format, and a user message with the task (its text
 * truncated to 1500 characters), the base failure summary and each sibling's
 * direction, description and profile evidence for this task kind (smoothed
 * rescue rate and attempts per base failure type, thin cells marked, mean turns).
 * Siblings appear in the given order, so the prompt is deterministic.
 */
export function voterMessages(context: VoteContext): Array<{ role: 'system' | 'user'; content: string }> {
  const failureTypes = sortedFailures(context.group).map(([type]) => type);
  const ids = context.siblings.map((s) => s.id);
  const wanted = Math.min(context.k, ids.length);
  const system = [
    'You route failed tasks in agent training. Every attempt at a task under the base harness failed;',
    'sibling harnesses (variants of the agent scaffold, each repairing one direction) can retry it.',
    'Rank the siblings by how likely each is to solve this task, using the task, how the base failed',
    'and the measured evidence (rescue rates marked thin rest on few attempts).',
    'Answer with only a JSON object of the form {"ranking": ["<harness id>", ...]}, best harness first,',
    'each id at most once, using only the ids you are given. No other text.',
  ].join('\n');
  const siblings = context.siblings.map((s) =>
    [
      `- ${s.id} (direction: ${s.direction}): ${s.description}`,
      ...siblingEvidence(context.profiles, s.id, context.kind, failureTypes).map((line) => `    ${line}`),
    ].join('\n'),
  );
  const user = [
    `Task ${context.taskId} (kind: ${context.kind}), as the agent sees it:`,
    '<<<',
    truncateTaskText(context.taskText),
    '>>>',
    '',
    `Base harness: ${failureSummary(context.group)}.`,
    '',
    `Sibling harnesses, with their measured evidence on ${context.kind} tasks the base harness failed:`,
    ...siblings,
    '',
    `Answer with only {"ranking": [...]} listing the best harness first. Rank at least ${wanted} of these ids: ${ids.join(', ')}.`,
  ].join('\n');
  return [
    { role: 'system', content: system },
    { role: 'user', content: user },
  ];
}

/** A voter's label in logs and records: `${model}@${baseUrl}`. */
export function voterLabel(voter: VoterConfig): string {
  return `${voter.model}@${voter.baseUrl}`;
}

/** The text of the balanced `{...}` starting at `start` (string-aware), or the rest of the text if it never closes. */
function objectTextAt(text: string, start: number): string {
  let depth = 0;
  let inString = false;
  let escaped = false;
  for (let i = start; i < text.length; i++) {
    const ch = text[i];
    if (inString) {
      if (escaped) escaped = false;
      else if (ch === '\\') escaped = true;
      else if (ch === '"') inString = false;
    } else if (ch === '"') inString = true;
    else if (ch === '{') depth += 1;
    else if (ch === '}') {
      depth -= 1;
      if (depth === 0) return text.slice(start, i + 1);
    }
  }
  return text.slice(start);
}

/**
 * The JSON object in a voter's answer, wherever it is: bare, in a ```json
 * fence or amid prose. Tries each `{` in turn; prefers an object with a
 * `ranking` key, else the first object that parses.
 */
function findJsonObject(text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  let firstObject: unknown;
  let firstError: string | undefined;
  for (let start = text.indexOf('{'); start !== -1; start = text.indexOf('{', start + 1)) {
    let value: unknown;
    try {
      value = JSON.parse(objectTextAt(text, start));
    } catch (err) {
      firstError ??= (err as Error).message;
      continue;
    }
    if (typeof value !== 'object' || value === null || Array.isArray(value)) continue;
    if ('ranking' in value) return { ok: true, value };
    firstObject ??= value;
  }
  if (firstObject !== undefined) return { ok: true, value: firstObject };
  if (firstError !== undefined) return { ok: false, reason: `answer is not valid JSON: ${firstError}` };
  return { ok: false, reason: 'no JSON object in the answer' };
}

/**
 * Parses one voter's answer text: finds the JSON object (bare, inside a
 * ```json fence, or surrounded by prose), validates it with VoterBallot and
 * rejects ids not in `siblingIds`, since a ballot naming a harness that does
 * not exist says the voter misread the prompt. Reasons: "no JSON object in the
 * answer", "answer is not valid JSON: ...", "answer out of schema: <path>:
 * <message>", "unknown harness ids: x, y (valid: a, b, c)".
 */
export function parseBallot(text: string, siblingIds: readonly string[]): BallotResult {
  const found = findJsonObject(text);
  if (!found.ok) return found;
  const ballot = VoterBallot.safeParse(found.value);
  if (!ballot.success) {
    const issue = ballot.error.issues[0];
    const path = issue.path.length > 0 ? issue.path.join('.') : '(root)';
    return { ok: false, reason: `answer out of schema: ${path}: ${issue.message}` };
  }
  const unknown = ballot.data.ranking.filter((id) => !siblingIds.includes(id));
  if (unknown.length > 0) return { ok: false, reason: `unknown harness ids: ${unknown.join(', ')} (valid: ${siblingIds.join(', ')})` };
  return { ok: true, ranking: ballot.data.ranking };
}

/** The innermost cause's message: for a refused connection "connect ECONNREFUSED ...", not just "fetch failed". */
function rootCauseMessage(err: Error): string {
  // Duck-typed: fetch's errors come from another realm than ours under test runners, so instanceof fails.
  const describe = (e: { message?: unknown; code?: unknown }) =>
    typeof e.message === 'string' && e.message ? e.message : String(e.code ?? '');
  let root: { message?: unknown; code?: unknown; cause?: unknown } = err;
  for (let depth = 0; depth < 8 && typeof root.cause === 'object' && root.cause !== null; depth++) root = root.cause;
  return root === err || !describe(root) ? err.message : `${err.message} (${describe(root)})`;
}

/** Why a voter's request failed, in the words a user reads in the routing record. */
function requestFailureReason(err: unknown, voter: VoterConfig, cancelled: boolean, pastDeadline: boolean): string {
  if (cancelled) return 'cancelled before the voter answered';
  if (pastDeadline || err instanceof APIConnectionTimeoutError) return `timed out after ${voter.timeoutSeconds}s`;
  if (err instanceof APIError && err.status !== undefined) return `HTTP ${err.status}: ${err.message.replace(/^\d{3} /, '')}`;
  if (err instanceof APIConnectionError) return `request failed: ${rootCauseMessage(err)}`;
  return `request failed: ${typeof err === 'object' && err !== null && 'message' in err ? rootCauseMessage(err as Error) : String(err)}`;
}

async function askVoter(voter: VoterConfig, apiKey: string, context: VoteContext, signal: AbortSignal | undefined): Promise<VoteOutcome> {
  const label = voterLabel(voter);
  const started = performance.now();
  const latencyMs = () => Math.round(performance.now() - started);
  // The client's timeout ends at the response headers; this deadline also covers reading the body.
  const deadline = new AbortController();
  const timer = setTimeout(() => deadline.abort(), voter.timeoutSeconds * 1000);
  try {
    const client = new OpenAI({ baseURL: voter.baseUrl, apiKey, timeout: voter.timeoutSeconds * 1000, maxRetries: 0 });
    const response = await client.chat.completions.create(
      { model: voter.model, messages: voterMessages(context), temperature: 0 },
      { signal: signal ? AbortSignal.any([signal, deadline.signal]) : deadline.signal },
    );
    const content = response.choices[0]?.message?.content?.trim();
    if (!content) return { voter: label, ok: false, reason: 'empty answer', latencyMs: latencyMs() };
    const ballot = parseBallot(
      content,
      context.siblings.map((s) => s.id),
    );
    return ballot.ok
      ? { voter: label, ok: true, ranking: ballot.ranking, latencyMs: latencyMs() }
      : { voter: label, ok: false, reason: ballot.reason, latencyMs: latencyMs() };
  } catch (err) {
    const reason = requestFailureReason(err, voter, signal?.aborted ?? false, deadline.signal.aborted);
    return { voter: label, ok: false, reason, latencyMs: latencyMs() };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Asks every voter at once and never rejects: each voter's failure (HTTP
 * error, timeout, connection error, empty or malformed answer) becomes an
 * outcome with its reason, so one bad endpoint costs only its own ballot.
 * No retries (maxRetries 0) and temperature 0: a late or flaky voter is
 * dropped for this decision rather than delaying the rescue. Outcomes are in
 * the order of `voters`. Aborting `options.signal` cancels every request.
 * A voter's `apiKeyEnv` that is not set in this process throws (MissingSecretError).
 */
export async function collectVotes(
  voters: readonly VoterConfig[],
  context: VoteContext,
  options: { signal?: AbortSignal } = {},
): Promise<VoteOutcome[]> {
  // A voter whose key is missing from this worker's environment is a setup to fix, not a ballot to drop: it throws here.
  const keys = voters.map((voter, i) => apiKeyOf(voter, `router.voters.${i}`));
  return Promise.all(voters.map((voter, i) => askVoter(voter, keys[i], context, options.signal)));
}

/**
 * Borda count over the voters' rankings, each of which may be partial: with n
 * candidates, the harness at position i (0-based) of a ranking earns n - i
 * points, an unlisted harness 0; a harness's score is its sum over rankings.
 * Ids that are not candidates are dropped before positions are counted (they
 * take no place), and a repeated id counts at its first position only.
 * Ranked by points descending; ties broken by position in `tieBreakOrder` (the
 * validation rule's ranking: profile evidence, then cost; ids missing from it
 * come after those in it), then by id. With no rankings the result is the
 * validation order.
 */
export function bordaCount(
  rankings: readonly (readonly string[])[],
  candidates: readonly string[],
  tieBreakOrder: readonly string[],
): { ranked: string[]; points: Record<string, number> } {
  const points = new Map<string, number>(candidates.map((id) => [id, 0]));
  const n = points.size;
  for (const ranking of rankings) {
    const listed = [...new Set(ranking.filter((id) => points.has(id)))];
    listed.forEach((id, i) => points.set(id, points.get(id)! + n - i));
  }
  const tieRank = (id: string) => {
    const i = tieBreakOrder.indexOf(id);
    return i === -1 ? tieBreakOrder.length : i;
  };
  const ranked = [...points.keys()].sort((a, b) => points.get(b)! - points.get(a)! || tieRank(a) - tieRank(b) || a.localeCompare(b));
  return { ranked, points: Object.fromEntries(points) };
}
