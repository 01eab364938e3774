/**
 * The charset environment: a task asks for a reply (a number, a year, a
 * code) and the reply is scored by the share of its characters that belong
 * to the task's character set (digits): partial credit from 0 to 1, success
 * at `successShare`. One turn per episode.
 *
 * It is a toy on purpose: the real CPU stack trains a tiny random-init model
 * that can learn it from reward alone, so every path of a Harness-S step
 * (dead groups, rescue under sibling harnesses, GRPO, real gradients, real
 * LoRA adapters) runs on real engines in minutes. Tasks: tasks.json;
 * harness pool: harnesses/.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { specHarness } from '../../harness/spec-harness';
import { loadHarnessPool, specFiles, type LoadedSpec } from '../../harness/spec';
import type { Harness } from '../../harness/harness';
import { formatZodError } from '../../zod-errors';
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import { UserError } from '../../errors';

export const CHARSET_TASKS_FILE = path.join(__dirname, 'tasks.json');
export const CHARSET_POOL_DIR = path.join(__dirname, 'harnesses');

export const CharsetTaskFile = z
  .object({
    name: z.string().min(1),
    description: z.string().default(''),
    charsets: z.record(z.string(), z.string().min(1)),
    /** A reply at least this share in the charset succeeds. */
    successShare: z.number().gt(0).max(1),
    kinds: z
      .array(
        z.object({ name: z.string().regex(/^[a-z][a-z0-9_]*$/), charset: z.string(), instructions: z.array(z.string().min(1)).min(1) }),
      )
      .min(1),
  })
  .superRefine((file, ctx) => {
    file.kinds.forEach((kind, i) => {
      if (!(kind.charset in file.charsets)) {
        ctx.addIssue({
          code: 'custom',
          path: ['kinds', i, 'charset'],
          message: `'${kind.charset}' is not one of charsets (${Object.keys(file.charsets).join(', ')})`,
        });
      }
    });
  });
export type CharsetTaskFile = z.infer<typeof CharsetTaskFile>;

export class CharsetTaskFileError extends UserError {
  override name = 'CharsetTaskFileError';
}

export function loadCharsetTasks(file = CHARSET_TASKS_FILE): CharsetTaskFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new CharsetTaskFileError(`charset task file ${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
  const parsed = CharsetTaskFile.safeParse(raw);
  if (!parsed.success) throw new CharsetTaskFileError(`charset task file ${file} is invalid:\n${formatZodError(parsed.error)}`);
  return parsed.data;
}

/** The share of a reply's non-blank characters that are in `charset`; 0 for a blank reply. */
export function charsetShare(reply: string, charset: string): number {
  const chars = [...reply].filter((c) => !/\s/u.test(c));
  if (chars.length === 0) return 0;
  return chars.filter((c) => charset.includes(c)).length / chars.length;
}

interface CharsetTask extends TaskRef {
  instruction: string;
  charset: string;
}

class CharsetEpisode implements Episode {
  private over = false;

  constructor(
    readonly task: TaskRef,
    private readonly instructionText: string,
    private readonly charset: string,
    private readonly successShare: number,
  ) {}

  instruction(): string {
    return this.instructionText;
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.over) throw new Error(`charset episode ${this.task.taskId} is over; it has one turn`);
    this.over = true;
    const share = charsetShare(action, this.charset);
    const blank = action.trim() === '';
    const success = !blank && share >= this.successShare;
    return {
      observation: `Observation: ${Math.round(share * 100)}% of the reply's characters are in the task's character set`,
      done: true,
      success,
      reward: share,
      failureType: success ? null : blank ? 'format_error' : 'wrong_answer',
    };
  }

  async close(): Promise<void> {
    this.over = true;
  }
}

export class CharsetEnvironment implements Environment {
  readonly id = 'charset';
  private readonly tasks: CharsetTask[];
  private readonly pool: Harness[];

  /** `pool`: the harness specs, base first (loadHarnessPool); the shipped pool when absent. */
  constructor(
    private readonly file: CharsetTaskFile,
    pool: readonly LoadedSpec[] = loadHarnessPool(specFiles(CHARSET_POOL_DIR)),
  ) {
    this.tasks = file.kinds.flatMap((kind) =>
      kind.instructions.map((instruction, i) => ({
        taskId: `${kind.name}-${String(i).padStart(3, '0')}`,
        kind: kind.name,
        instruction,
        charset: file.charsets[kind.charset],
      })),
    );
    this.pool = pool.map((loaded) => specHarness(loaded, ''));
  }

  static fromFile(tasksFile?: string, harnessDir = CHARSET_POOL_DIR): CharsetEnvironment {
    return new CharsetEnvironment(loadCharsetTasks(tasksFile), loadHarnessPool(specFiles(harnessDir)));
  }

  listTasks(): TaskRef[] {
    return this.tasks.map(({ taskId, kind }) => ({ taskId, kind }));
  }

  describeTask(taskId: string): string {
    return this.task(taskId).instruction;
  }

  harnesses(): Harness[] {
    return this.pool;
  }

  async startEpisode(taskId: string): Promise<Episode> {
    const task = this.task(taskId);
    return new CharsetEpisode({ taskId, kind: task.kind }, task.instruction, task.charset, this.file.successShare);
  }

  private task(taskId: string): CharsetTask {
    const task = this.tasks.find((t) => t.taskId === taskId);
    if (!task) throw new Error(`the charset tasks (${this.file.name}) have no task '${taskId}'`);
    return task;
  }
}
