/**
 * An env of your own, in a module of its own: the "shout" env. Each task
 * names a phrase to say, and the env wants it shouted: the reward is the
 * share of the reply's letters that are capitals (partial credit, 0 for a
 * reply without letters), and a reply at `successShare` or above succeeds.
 *
 * A run config uses it with `"env": {"kind": "module", "module":
 * "./examples/module-env/env.ts", "options": {...}}` (examples/module-env.json);
 * the workers load this file, nothing in the project names it. What a module
 * exports is in docs/writing-an-env.md.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import type { Environment, Episode, StepOutcome } from '../../core/harness/environment';
import type { TaskRef } from '../../core/harness/task';
import type { Harness } from '../../core/harness/harness';

/** The env's own settings, from `env.options` in the run config. */
const Options = z.strictObject({
  /** A task file like tasks.json; this folder's tasks.json when absent. */
  tasks: z.string().min(1).optional(),
  /** The share of capital letters a reply needs to succeed. */
  successShare: z.number().gt(0).max(1).default(0.9),
});
type Options = z.infer<typeof Options>;

const TaskFile = z.object({
  tasks: z.array(z.object({ id: z.string().min(1), kind: z.string().min(1), phrase: z.string().min(1) })).min(1),
});
type Task = z.infer<typeof TaskFile>['tasks'][number];

/** The share of the letters of `reply` that are capitals; 0 when it has none. */
export function capitalShare(reply: string): number {
  const letters = [...reply].filter((c) => c.toLowerCase() !== c.toUpperCase());
  if (letters.length === 0) return 0;
  return letters.filter((c) => c === c.toUpperCase()).length / letters.length;
}

class ShoutEpisode implements Episode {
  private over = false;

  constructor(
    readonly task: TaskRef,
    private readonly phrase: string,
    private readonly successShare: number,
  ) {}

  instruction(): string {
    return `Say this phrase: ${this.phrase}`;
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.over) throw new Error(`shout episode ${this.task.taskId} is over; it has one turn`);
    this.over = true;
    const reply = action.trim();
    const share = capitalShare(reply);
    const success = share >= this.successShare;
    return {
      observation: `${Math.round(share * 100)}% of the reply's letters are capitals`,
      done: true,
      success,
      reward: share,
      failureType: success ? null : reply === '' ? 'format_error' : 'wrong_answer',
    };
  }

  async close(): Promise<void> {
    this.over = true;
  }
}

class ShoutEnvironment implements Environment {
  readonly id = 'shout';
  private readonly tasks: Task[];

  constructor(
    private readonly options: Options,
    private readonly pool: Harness[],
  ) {
    const file = options.tasks ?? path.join(__dirname, 'tasks.json');
    const parsed = TaskFile.safeParse(JSON.parse(readFileSync(file, 'utf8')));
    if (!parsed.success) throw new Error(`shout task file ${file} is invalid: ${parsed.error.message}`);
    this.tasks = parsed.data.tasks;
  }

  listTasks(): TaskRef[] {
    return this.tasks.map((t) => ({ taskId: t.id, kind: t.kind }));
  }

  describeTask(taskId: string): string {
    return `Say this phrase: ${this.task(taskId).phrase}`;
  }

  harnesses(): Harness[] {
    return this.pool;
  }

  async startEpisode(taskId: string): Promise<Episode> {
    const task = this.task(taskId);
    return new ShoutEpisode({ taskId: task.id, kind: task.kind }, task.phrase, this.options.successShare);
  }

  private task(taskId: string): Task {
    const task = this.tasks.find((t) => t.id === taskId);
    if (!task) throw new Error(`the shout env has no task '${taskId}'`);
    return task;
  }
}

export default {
  name: 'shout',
  harnessDir: 'harnesses',
  options: Options,
  // A wrong answer here is a reply not in capitals: what the env accepts, so the contract is what to repair.
  failureDirections: { wrong_answer: ['environment_contract', 'procedural_skill'] },
  create: (options: Record<string, unknown>, harnesses: Harness[]) => new ShoutEnvironment(options as Options, harnesses),
};
