/**
 * The staff directory env: a tool-using task family for a small real model
 * (SmolLM2-135M-Instruct on the real CPU stack). Each task asks one fact
 * about one person of a staff directory the policy cannot see:
 *
 *   user:      What is the city of Maria Lopez?
 *   assistant: lookup Maria Lopez
 *   user:      Maria Lopez: phone 4821, city Denver, team Sales, room 214
 *   assistant: answer Denver
 *
 * One command per turn: `lookup <full name>` shows a person's record (any
 * person of the directory), `answer <value>` ends the episode. Scored by
 * rule: reward 1 when the answer is the asked value (case and surrounding
 * punctuation aside), else 0. Any other reply is an error observation and
 * costs the turn.
 *
 * The directory and its tasks are made here from a fixed seed (320 people,
 * one question each, four kinds: phone, city, team, room); a fourth of the
 * tasks (20 of each kind) is held out (`options.split`: `train`, `heldout` or `all`). The names are
 * made up. A run config uses it with `"env": {"kind": "module", "module":
 * "./examples/directory-env/env.ts"}` (examples/smollm2.json).
 */
import { z } from 'zod';
import type { Environment, Episode, StepOutcome } from '../../core/harness/environment';
import type { TaskRef } from '../../core/harness/task';
import type { Harness } from '../../core/harness/harness';
import { mulberry32 } from '../../core/random';

const Options = z.strictObject({
  /** Which tasks the env offers: a fourth of them is held out for evaluation. */
  split: z.enum(['train', 'heldout', 'all']).default('train'),
});
type Options = z.infer<typeof Options>;

const FIRST = ['Maria', 'James', 'Ana', 'Omar', 'Lena', 'Tom', 'Sara', 'Ivan', 'Nina', 'Paul', 'Rosa', 'Ken'] as const;
const LAST = ['Lopez', 'Smith', 'Kim', 'Novak', 'Berg', 'Ali', 'Costa', 'Meyer', 'Park', 'Dubois', 'Rossi', 'Sato'] as const;
const MIDDLE = ['A.', 'B.', 'C.'] as const;
const CITIES = ['Denver', 'Oslo', 'Lima', 'Osaka', 'Porto', 'Quebec', 'Dakar', 'Perth', 'Bergen', 'Tucson'] as const;
const TEAMS = ['Sales', 'Legal', 'Design', 'Support', 'Finance', 'Research', 'Security', 'Logistics'] as const;
export const KINDS = ['phone', 'city', 'team', 'room'] as const;
type Kind = (typeof KINDS)[number];

export interface Person {
  name: string;
  phone: string;
  city: string;
  team: string;
  room: string;
}

export interface DirectoryTask {
  id: string;
  kind: Kind;
  person: Person;
  heldOut: boolean;
}

const PEOPLE = 320;

/** The directory: 320 distinct people (first, middle initial, last name), fixed by the seed. */
export function directory(): Person[] {
  const random = mulberry32(20261206);
  const pick = <T>(items: readonly T[]) => items[Math.floor(random() * items.length)];
  const names = FIRST.flatMap((f) => MIDDLE.flatMap((m) => LAST.map((l) => `${f} ${m} ${l}`)));
  for (let i = names.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1));
    [names[i], names[j]] = [names[j], names[i]];
  }
  return names.slice(0, PEOPLE).map((name) => ({
    name,
    phone: String(1000 + Math.floor(random() * 9000)),
    city: pick(CITIES),
    team: pick(TEAMS),
    room: String(100 + Math.floor(random() * 400)),
  }));
}

/** One task per person, the kinds in turn; every fourth run of four (one task of each kind) held out. */
export function directoryTasks(people = directory()): DirectoryTask[] {
  return people.map((person, i) => ({
    id: `dir-${String(i).padStart(3, '0')}`,
    kind: KINDS[i % KINDS.length],
    person,
    heldOut: Math.floor(i / KINDS.length) % 4 === 3,
  }));
}

export function record(p: Person): string {
  return `${p.name}: phone ${p.phone}, city ${p.city}, team ${p.team}, room ${p.room}`;
}

const normalize = (text: string) =>
  text
    .toLowerCase()
    .replace(/[`"'*.,;:!?()[\]<>]/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();

/** The first line of the reply that starts with lookup or answer (after a speaker's label or a bullet), or null. */
export function parseCommand(reply: string): { verb: 'lookup' | 'answer'; arg: string } | null {
  const match = /^[\s>*`"'-]*(?:(?:you|assistant|me)\s*:\s*)?[`*"']*(lookup|answer)\b[`*"']*\s*:?\s*(.*)$/im.exec(reply);
  return match ? { verb: match[1].toLowerCase() as 'lookup' | 'answer', arg: match[2].trim() } : null;
}

const VALUE_WORDS = new Set([...CITIES, ...TEAMS].map((v) => v.toLowerCase()));

/**
 * Whether an answer states the asked value and no other: its words include
 * the value, and no other city, team or number of three or more digits (an
 * answer that lists every field of the record, or many numbers, fails).
 */
export function answers(text: string, value: string): boolean {
  const words = normalize(text).split(' ');
  const want = normalize(value);
  if (!words.includes(want)) return false;
  return words.every((w) => w === want || !(VALUE_WORDS.has(w) || /^\d{3,}$/.test(w)));
}

const COMMANDS = 'Reply with one command: lookup <full name> [field], or answer <value>.';

class DirectoryEpisode implements Episode {
  private over = false;
  private lookedUp = false;

  constructor(
    readonly task: TaskRef,
    private readonly asked: DirectoryTask,
    private readonly byName: Map<string, Person>,
  ) {}

  instruction(): string {
    return `What is the ${this.asked.kind} of ${this.asked.person.name}?`;
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.over) throw new Error(`directory episode ${this.task.taskId} is over`);
    // No command: after a lookup, the reply is the answer; before one, a reply naming a person looks them up.
    const command = parseCommand(action) ?? (this.lookedUp ? { verb: 'answer' as const, arg: action } : this.implicitLookup(action));
    if (!command) return { observation: `Not a command. ${COMMANDS}`, kind: 'error', done: false };
    if (command.verb === 'lookup') {
      const { person, field } = this.resolve(command.arg);
      if (!person) return { observation: `No one named "${command.arg.slice(0, 60)}" in the directory.`, kind: 'empty', done: false };
      this.lookedUp = true;
      const shown = field ? `${person.name}: ${field} ${person[field]}` : record(person);
      return { observation: `Directory: ${shown}\nQuestion: ${this.instruction()}`, done: false };
    }
    this.over = true;
    const success = answers(command.arg, this.asked.person[this.asked.kind]);
    return {
      observation: success ? 'Correct.' : 'Wrong answer.',
      done: true,
      success,
      reward: success ? 1 : 0,
      failureType: success ? null : 'wrong_answer',
    };
  }

  async close(): Promise<void> {
    this.over = true;
  }

  /** `<full name>` or `<full name> <field>`. */
  private resolve(arg: string): { person?: Person; field?: Kind } {
    const words = normalize(arg).split(' ');
    const last = words.at(-1) as Kind;
    if (KINDS.includes(last)) {
      const person = this.byName.get(words.slice(0, -1).join(' '));
      if (person) return { person, field: last };
    }
    return { person: this.byName.get(words.join(' ')) };
  }

  /** A reply with no command that names a person of the directory looks them up, as a search box would. */
  private implicitLookup(reply: string): { verb: 'lookup'; arg: string } | null {
    const text = ` ${normalize(reply)} `;
    for (const [name, person] of this.byName) if (text.includes(` ${name} `)) return { verb: 'lookup', arg: person.name };
    return null;
  }
}

class DirectoryEnvironment implements Environment {
  readonly id = 'directory';
  private readonly tasks: DirectoryTask[];
  private readonly byName: Map<string, Person>;

  constructor(
    options: Options,
    private readonly pool: Harness[],
  ) {
    const all = directoryTasks();
    this.byName = new Map(all.map((t) => [normalize(t.person.name), t.person]));
    this.tasks = all.filter((t) => options.split === 'all' || t.heldOut === (options.split === 'heldout'));
  }

  listTasks(): TaskRef[] {
    return this.tasks.map((t) => ({ taskId: t.id, kind: t.kind }));
  }

  describeTask(taskId: string): string {
    const task = this.task(taskId);
    return `What is the ${task.kind} of ${task.person.name}? (a staff directory the agent can query with \`lookup <name>\`)`;
  }

  harnesses(): Harness[] {
    return this.pool;
  }

  async startEpisode(taskId: string): Promise<Episode> {
    const task = this.task(taskId);
    return new DirectoryEpisode({ taskId: task.id, kind: task.kind }, task, this.byName);
  }

  private task(taskId: string): DirectoryTask {
    const task = this.tasks.find((t) => t.id === taskId);
    if (!task) throw new Error(`the directory env (this split) has no task '${taskId}'`);
    return task;
  }
}

export default {
  name: 'directory',
  harnessDir: 'harnesses',
  options: Options,
  systemPrompt:
    "You answer questions about staff from a directory. To see a person's record, reply: lookup <full name>. Then answer in one short sentence.",
  create: (options: Record<string, unknown>, harnesses: Harness[]) => new DirectoryEnvironment(options as Options, harnesses),
};
