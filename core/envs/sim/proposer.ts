/**
 * The SIMULATED harness proposer: what Directional Harness Evolution asks on
 * the embedded default instead of an LLM (model `sim-proposer` on the sim
 * cluster, same chat-completions interface). It reads the proposal request the
 * workflow sends and answers like a proposer would: one sentence of reasoning,
 * then a ```json block holding `{"spec": <full SimHarness>}`. It is no model:
 * it runs a deterministic search, focused per slot on one task kind of the
 * failures for environment_contract and procedural_skill, and a fixed list of
 * moves for action_realization and trajectory_regulation, so the same request
 * always gets the same answer and two slots of a round never give the same
 * candidate. When no candidate is left or the request cannot be read, the
 * answer is plain text saying why, and the workflow drops the candidate.
 * docs/evolution.md ("The SIMULATED proposer") gives the exact moves.
 */
import { z } from 'zod';
// The request's wire format is the evolution's own (core/evolution/proposal.ts), read here as any proposer would.
import { REFUSAL_PREFIX, REQUEST_FENCE } from '../../evolution/proposal';
import { RepairDirection } from '../../harness/direction';
import { FINISH, SimHarness } from './world';

/** The model name the sim cluster answers proposal requests under. */
export const SIM_PROPOSER_MODEL = 'sim-proposer';

/** trajectory_regulation's budget move: the turns one move grants. */
const EXTRA_TURNS_STEP = 2;
const VERIFY = 'verify';

export interface ProposerMessage {
  role: string;
  content: string;
}

/** The env facts the search reads: the world's behaviours, and which of them consult the environment. */
const SimEnvFacts = z
  .object({
    behaviours: z.array(z.string()).min(1),
    contractBehaviours: z.array(z.string()).default([]),
  })
  .superRefine((facts, ctx) => {
    facts.contractBehaviours.forEach((b, i) => {
      if (!facts.behaviours.includes(b)) {
        ctx.addIssue({ code: 'custom', path: ['contractBehaviours', i], message: `unknown behaviour '${b}' (not in envFacts.behaviours)` });
      }
    });
  });

/** Only the fields of the proposal request the search reads; anything else in it is ignored. */
const SimProposalRequest = z.object({
  env: z.literal('sim', { error: "this proposer only answers for env 'sim'" }),
  direction: RepairDirection.exclude(['base'], { error: 'expected a repair direction (not base)' }),
  round: z.number().int().min(1),
  slot: z.number().int().min(1),
  parent: SimHarness,
  envFacts: SimEnvFacts,
  failures: z
    .array(
      z.object({
        kind: z.string(),
        failureType: z.string().nullable(),
        turns: z.array(z.object({ role: z.string(), content: z.string() })),
      }),
    )
    .default([]),
  parentResults: z.object({ targetRescueRate: z.number().nullish() }).nullish(),
});
type SimProposalRequest = z.infer<typeof SimProposalRequest>;
type Direction = SimProposalRequest['direction'];

/**
 * What the sim proposer answers: a candidate harness (with the task kind it
 * focused on, null for directions that do not focus), or why there is none.
 * Either way `text` is the assistant's answer.
 */
export type SimProposal =
  | { kind: 'candidate'; spec: SimHarness; move: string; focusKind: string | null; text: string }
  | { kind: 'declined'; reason: string; text: string };

/** The assistant's answer text to a proposal request (docs/evolution.md gives the search). */
export function answerProposalRequest(messages: readonly ProposerMessage[]): string {
  return simProposal(messages).text;
}

/** The sim proposer's answer with what it decided, for callers that log it. */
export function simProposal(messages: readonly ProposerMessage[]): SimProposal {
  const read = readRequest(messages);
  if (!read.ok) return declined(`the proposal request cannot be read: ${read.problem}`);
  const request = read.request;
  const found = isFocused(request.direction) ? focusedSearch(request, request.direction) : orderedSearch(request);
  if (!found.ok) return declined(`no ${request.direction} move is left for slot ${request.slot} of round ${request.round}: ${found.why}`);
  const { candidate, evidence } = found;
  const focusNote = candidate.focus ? ` for its ${candidate.focus.kind} failures` : '';
  const spec = SimHarness.parse({
    id: placeholderId(request),
    parent: request.parent.id,
    direction: request.direction,
    description: `Evolved by the SIMULATED proposer (round ${request.round}, slot ${request.slot}) from '${request.parent.id}'${focusNote}: ${candidate.move}.`,
    hints: candidate.harness.hints,
    avoid: candidate.harness.avoid,
    formatHint: candidate.harness.formatHint,
    scaffold: { performs: candidate.harness.scaffold.performs, repairFormat: candidate.harness.scaffold.repairFormat },
    extraTurns: candidate.harness.extraTurns,
  });
  const rescue = request.parentResults?.targetRescueRate;
  const parentNote = rescue != null ? `; parent '${request.parent.id}' rescued ${Math.round(rescue * 100)}% of its targets` : '';
  const reasoning = `[SIMULATED proposer] ${request.direction}, slot ${request.slot}: ${evidence}${parentNote}, so this candidate ${candidate.move}.`;
  const text = `${reasoning}\n\n\`\`\`json\n${JSON.stringify({ spec }, null, 2)}\n\`\`\`\n`;
  return { kind: 'candidate', spec, move: candidate.move, focusKind: candidate.focus?.kind ?? null, text };
}

function declined(reason: string): SimProposal {
  return { kind: 'declined', reason, text: `[SIMULATED proposer] No candidate: ${reason}.` };
}

type ReadResult = { ok: true; request: SimProposalRequest } | { ok: false; problem: string };

function readRequest(messages: readonly ProposerMessage[]): ReadResult {
  const users = messages.filter((m) => m.role === 'user');
  const last = users.at(-1);
  if (!last) return { ok: false, problem: 'there is no user message' };
  const source = last.content.trimStart().startsWith(REFUSAL_PREFIX)
    ? [...users].reverse().find((m) => lastRequestBlock(m.content) !== undefined)
    : last;
  const block = source && lastRequestBlock(source.content);
  if (block === undefined) return { ok: false, problem: `no ${REQUEST_FENCE} block in the last user message` };
  let raw: unknown;
  try {
    raw = JSON.parse(block);
  } catch (err) {
    return { ok: false, problem: `its block is not JSON (${(err as Error).message})` };
  }
  const parsed = SimProposalRequest.safeParse(raw);
  if (!parsed.success) return { ok: false, problem: `its block is not a sim proposal request (${issueList(parsed.error)})` };
  return { ok: true, request: parsed.data };
}

function issueList(error: z.ZodError): string {
  return error.issues.map((issue) => `${issue.path.map(String).join('.') || '(root)'}: ${issue.message}`).join('; ');
}

/**
 * The body of the last request block in a message. The block closes at the
 * first line that is only a fence; pretty-printed JSON never has one, since
 * its strings sit on one line each.
 */
function lastRequestBlock(content: string): string | undefined {
  const start = content.lastIndexOf(REQUEST_FENCE);
  if (start < 0) return undefined;
  const bodyStart = content.indexOf('\n', start);
  if (bodyStart < 0) return undefined;
  const rest = content.slice(bodyStart + 1);
  const close = /^```[ \t]*$/m.exec(rest);
  return close ? rest.slice(0, close.index) : undefined;
}

const POLICY_ACTION = /^\s*(?:Action|Maybe):\s*(\S+)/gm;
const HARNESS_ACTION = /([a-z][a-z0-9_]*) done by harness/g;

function performedIn(turns: ReadonlyArray<{ role: string; content: string }>): Set<string> {
  const done = new Set<string>();
  for (const turn of turns) {
    const pattern = turn.role === 'assistant' ? POLICY_ACTION : turn.role === 'user' ? HARNESS_ACTION : undefined;
    if (!pattern) continue;
    for (const match of turn.content.matchAll(pattern)) done.add(match[1]);
  }
  return done;
}

interface BehaviourMiss {
  behaviour: string;
  /** Failing trajectories that did not perform it. */
  missed: number;
  /** `missed` as a share of the failing trajectories counted. */
  missRate: number;
}

/** Behaviours by how many of these trajectories missed them, most first; ties keep envFacts order. */
function rankByMisses(behaviours: readonly string[], performed: ReadonlyArray<Set<string>>): BehaviourMiss[] {
  return behaviours
    .map((behaviour, order) => {
      const missed = performed.filter((done) => !done.has(behaviour)).length;
      return { behaviour, order, missed, missRate: performed.length > 0 ? missed / performed.length : 0 };
    })
    .sort((a, b) => b.missed - a.missed || a.order - b.order)
    .map(({ behaviour, missed, missRate }) => ({ behaviour, missed, missRate }));
}

/** How many trajectories missed each behaviour, in words ("read_docs 2/3, verify 1/3"); behaviours none missed are left out. */
function missesInWords(ranking: readonly BehaviourMiss[], trajectories: number): string {
  return ranking
    .filter((r) => r.missed > 0)
    .map((r) => `${r.behaviour} ${r.missed}/${trajectories}`)
    .join(', ');
}

interface Move {
  /** What the move does, in words, for the description and the reasoning. */
  label: string;
  harness: SimHarness;
}

interface FailingKind {
  kind: string;
  /** This kind's failing trajectories. */
  failures: number;
  /** Every behaviour with its miss rate among this kind's failures, highest first; ties keep envFacts order. */
  ranking: BehaviourMiss[];
}

/** A move the search settled on, with the kind it repairs (null for directions that do not focus on a kind). */
interface Candidate {
  move: string;
  harness: SimHarness;
  focus: FailingKind | null;
}

type SearchResult = { ok: true; candidate: Candidate; evidence: string } | { ok: false; why: string };

type FocusedDirection = 'environment_contract' | 'procedural_skill';

function isFocused(direction: Direction): direction is FocusedDirection {
  return direction === 'environment_contract' || direction === 'procedural_skill';
}

/** The failures grouped by kind: most failures first, ties in order of first appearance. */
function failingKinds(request: SimProposalRequest): FailingKind[] {
  const performedByKind = new Map<string, Array<Set<string>>>();
  for (const failure of request.failures) {
    const performed = performedByKind.get(failure.kind) ?? [];
    performed.push(performedIn(failure.turns));
    performedByKind.set(failure.kind, performed);
  }
  return [...performedByKind]
    .map(([kind, performed], order) => ({
      kind,
      order,
      failures: performed.length,
      ranking: rankByMisses(request.envFacts.behaviours, performed),
    }))
    .sort((a, b) => b.failures - a.failures || a.order - b.order)
    .map(({ kind, failures, ranking }) => ({ kind, failures, ranking }));
}

/** The behaviours a focused direction works with: environment_contract the contract ones, procedural_skill the rest. */
function behavioursOf(direction: FocusedDirection, facts: SimProposalRequest['envFacts']): Set<string> {
  if (direction === 'environment_contract')
    return new Set(facts.contractBehaviours.length > 0 ? facts.contractBehaviours : facts.behaviours);
  return new Set(facts.behaviours.filter((b) => !facts.contractBehaviours.includes(b)));
}

function hinting(parent: SimHarness, added: readonly string[]): SimHarness {
  return { ...parent, hints: [...parent.hints, ...added.filter((b) => !parent.hints.includes(b))] };
}

function performing(parent: SimHarness, behaviour: string): SimHarness {
  const performs = parent.scaffold.performs.includes(behaviour) ? parent.scaffold.performs : [...parent.scaffold.performs, behaviour];
  return { ...parent, scaffold: { ...parent.scaffold, performs } };
}

/** A kind's moves for a focused direction, applied to the parent, in the documented order. */
function kindMoves(direction: FocusedDirection, parent: SimHarness, kind: FailingKind, usable: ReadonlySet<string>): Move[] {
  const ranked = kind.ranking.filter((r) => usable.has(r.behaviour));
  if (direction === 'environment_contract') {
    return ranked.flatMap(({ behaviour }) => [
      { label: `hints ${behaviour}`, harness: hinting(parent, [behaviour]) },
      { label: `performs ${behaviour} in the harness (scaffold.performs)`, harness: performing(parent, behaviour) },
    ]);
  }
  const unhinted = ranked.filter((r) => !parent.hints.includes(r.behaviour));
  if (unhinted.length === 0) return [];
  const frequent = unhinted.filter((r) => r.missRate >= 0.5);
  const recipe = (frequent.length > 0 ? frequent : unhinted.slice(0, 1)).map((r) => r.behaviour);
  return [{ label: `hints the recipe ${recipe.join(', ')}`, harness: hinting(parent, recipe) }];
}

/**
 * environment_contract and procedural_skill: the candidates of slots 1 to
 * `slot` in turn, each slot taking what `pickForSlot` gives it; the last one
 * is this slot's.
 */
function focusedSearch(request: SimProposalRequest, direction: FocusedDirection): SearchResult {
  const kinds = failingKinds(request);
  if (kinds.length === 0) return { ok: false, why: 'no failing trajectories were given, so there is no task kind to focus on' };
  const parent = request.parent;
  const usable = behavioursOf(direction, request.envFacts);
  const works = direction === 'environment_contract' ? 'contract' : 'procedural';
  const movesByKind = kinds.map((kind) => changingMoves(parent, kindMoves(direction, parent, kind, usable)));
  const given = new Set([effectKey(parent)]);
  let candidate: Candidate | undefined;
  for (let slot = 1; slot <= request.slot; slot++) {
    candidate = pickForSlot(kinds, movesByKind, slot, given);
    if (!candidate) {
      return {
        ok: false,
        why:
          `only ${slot - 1} move(s) of the search change parent '${parent.id}' for the failing kinds ${kinds.map((k) => k.kind).join(', ')} ` +
          `(${works} behaviours: ${[...usable].join(', ') || 'none'})`,
      };
    }
    given.add(effectKey(candidate.harness));
  }
  if (!candidate?.focus) throw new Error('slots start at 1, so a focused search always settles on a kind');
  const focus = candidate.focus;
  const slotKind = kinds[(request.slot - 1) % kinds.length].kind;
  const shifted = focus.kind === slotKind ? '' : `; ${slotKind}'s moves are taken by earlier slots`;
  const misses = missesInWords(
    focus.ranking.filter((r) => usable.has(r.behaviour)),
    focus.failures,
  );
  const evidence =
    `focus kind ${focus.kind} (${focus.failures} of ${request.failures.length} failing trajectories${shifted}), ` +
    (misses ? `whose failures skipped ${works} behaviours ${misses}` : `whose failures performed every ${works} behaviour`);
  return { ok: true, candidate, evidence };
}

/**
 * A slot's move: its focus kind's first move no earlier slot gave, else the
 * next kind's (wrapping round); when every kind's first move is given, the
 * kinds' second moves likewise, and so on.
 */
function pickForSlot(
  kinds: readonly FailingKind[],
  movesByKind: ReadonlyArray<readonly Move[]>,
  slot: number,
  given: ReadonlySet<string>,
): Candidate | undefined {
  const focusIndex = (slot - 1) % kinds.length;
  const deepest = Math.max(...movesByKind.map((moves) => moves.length));
  for (let depth = 0; depth < deepest; depth++) {
    for (let step = 0; step < kinds.length; step++) {
      const k = (focusIndex + step) % kinds.length;
      const move = movesByKind[k][depth];
      if (move && !given.has(effectKey(move.harness))) return { move: move.label, harness: move.harness, focus: kinds[k] };
    }
  }
  return undefined;
}

/** action_realization and trajectory_regulation: the slot-th move that changes the parent and gives a harness no earlier move gave. */
function orderedSearch(request: SimProposalRequest): SearchResult {
  const moves = changingMoves(request.parent, orderedMoves(request.direction, request.parent, request.envFacts.behaviours));
  const chosen = moves[request.slot - 1];
  if (!chosen) return { ok: false, why: `only ${moves.length} move(s) of the search change parent '${request.parent.id}'` };
  const failures = request.failures.length;
  const misses = missesInWords(
    rankByMisses(
      request.envFacts.behaviours,
      request.failures.map((f) => performedIn(f.turns)),
    ),
    failures,
  );
  const evidence =
    failures === 0
      ? 'no failing trajectories were given'
      : misses
        ? `failing trajectories skipped ${misses}`
        : 'every failing trajectory performed every behaviour';
  return { ok: true, candidate: { move: chosen.label, harness: chosen.harness, focus: null }, evidence };
}

/** Every move of a direction that does not focus on a kind, applied to the parent, in the documented order. */
function orderedMoves(direction: Direction, parent: SimHarness, behaviours: readonly string[]): Move[] {
  const avoidingFinish = (h: SimHarness): SimHarness => (h.avoid.includes(FINISH) ? h : { ...h, avoid: [...h.avoid, FINISH] });
  const moreTurns = (h: SimHarness): SimHarness => ({ ...h, extraTurns: h.extraTurns + EXTRA_TURNS_STEP });
  switch (direction) {
    case 'action_realization':
      return [
        { label: 'states the action format (formatHint)', harness: { ...parent, formatHint: true } },
        {
          label: 'repairs a malformed action (scaffold.repairFormat)',
          harness: { ...parent, scaffold: { ...parent.scaffold, repairFormat: true } },
        },
        {
          label: 'states the action format and repairs a malformed action (formatHint, scaffold.repairFormat)',
          harness: { ...parent, formatHint: true, scaffold: { ...parent.scaffold, repairFormat: true } },
        },
      ];
    case 'trajectory_regulation': {
      const verify = behaviours.includes(VERIFY) && !parent.hints.includes(VERIFY) ? [VERIFY] : [];
      return [
        { label: `avoids ${FINISH} and grants ${EXTRA_TURNS_STEP} more turns`, harness: moreTurns(avoidingFinish(parent)) },
        { label: `avoids ${FINISH}`, harness: avoidingFinish(parent) },
        {
          label: `grants ${EXTRA_TURNS_STEP} more turns${verify.length ? ` and hints ${VERIFY}` : ''}`,
          harness: { ...moreTurns(parent), hints: hinting(parent, verify).hints },
        },
      ];
    }
    case 'environment_contract':
    case 'procedural_skill':
      return [];
  }
}

/** The moves that change the parent and give a harness no earlier move of the list gave. */
function changingMoves(parent: SimHarness, moves: readonly Move[]): Move[] {
  const seen = new Set([effectKey(parent)]);
  return moves.filter((move) => {
    const key = effectKey(move.harness);
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

/**
 * A harness's effects (what a move can change), as a comparable string. Lists
 * count as sets: a recipe of the same hints in another order is the same candidate.
 */
function effectKey(h: SimHarness): string {
  const set = (list: readonly string[]) => [...new Set(list)].sort();
  return JSON.stringify([set(h.hints), set(h.avoid), h.formatHint, set(h.scaffold.performs), h.scaffold.repairFormat, h.extraTurns]);
}

const DIRECTION_TAG: Record<Direction, string> = {
  action_realization: 'ar',
  environment_contract: 'ec',
  procedural_skill: 'ps',
  trajectory_regulation: 'tr',
};

/** The workflow names the child itself; this only has to be a valid id. */
function placeholderId(request: SimProposalRequest): string {
  return `sim-${DIRECTION_TAG[request.direction]}-r${request.round}-s${request.slot}`;
}
