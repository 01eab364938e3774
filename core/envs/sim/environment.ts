/**
 * The SIMULATED environment: a task of a kind succeeds when the agent performs
 * every behaviour the kind requires and then finishes, within its turn budget.
 */
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import type { Harness } from '../../harness/harness';
import { FINISH, loadSimWorld, turnCost, type SimWorld } from './world';
import { simHarness } from './harnesses';
import { baseFirst } from '../../harness/pool';

export function simTaskId(kind: string, index: number): string {
  return `${kind}-${String(index).padStart(3, '0')}`;
}

class SimEpisode implements Episode {
  private readonly done = new Set<string>();
  private turnsUsed = 0;
  private finished = false;

  constructor(
    readonly task: TaskRef,
    private readonly world: SimWorld,
    private readonly requires: readonly string[],
    private readonly goal: string,
    private readonly maxTurns: number,
  ) {}

  instruction(): string {
    return `[SIMULATED] Task ${this.task.taskId} kind ${this.task.kind}: ${this.goal}`;
  }

  async step(action: string, options: { byHarness?: boolean } = {}): Promise<StepOutcome> {
    if (this.finished) throw new Error(`sim episode ${this.task.taskId} is over; no more actions`);
    const known = action === FINISH || this.world.behaviours.includes(action);
    if (!known) return this.end(`Observation: unknown action ${action}`, 'format_error');
    if (action === FINISH) {
      const missing = this.requires.filter((b) => !this.done.has(b));
      return missing.length === 0 ? this.end('Observation: task solved', null) : this.end('Observation: wrong answer', 'wrong_answer');
    }
    // Work the harness does itself costs the agent no turns.
    if (!options.byHarness) this.turnsUsed += turnCost(this.world, action);
    const repeated = this.done.has(action);
    this.done.add(action);
    const observation = repeated
      ? `Observation: ${action} already done`
      : `Observation: ${action} done${options.byHarness ? ' by harness' : ''}`;
    if (this.turnsUsed >= this.maxTurns) return this.end(`${observation}. Turn limit reached`, 'turn_limit');
    return { observation, done: false };
  }

  async close(): Promise<void> {
    this.finished = true;
  }

  private end(observation: string, failureType: StepOutcome['failureType']): StepOutcome {
    this.finished = true;
    const success = failureType === null;
    return { observation, done: true, success, reward: success ? 1 : 0, failureType };
  }
}

export class SimEnvironment implements Environment {
  readonly id = 'sim';
  private readonly tasks: Array<TaskRef & { requires: string[]; goal: string }>;

  constructor(readonly world: SimWorld) {
    this.tasks = world.kinds.flatMap((kind) =>
      Array.from({ length: kind.tasks }, (_, i) => ({
        taskId: simTaskId(kind.name, i),
        kind: kind.name,
        requires: kind.requires,
        goal: kind.goal,
      })),
    );
  }

  static fromFile(worldFile?: string): SimEnvironment {
    return new SimEnvironment(loadSimWorld(worldFile));
  }

  listTasks(): TaskRef[] {
    return this.tasks.map(({ taskId, kind }) => ({ taskId, kind }));
  }

  describeTask(taskId: string): string {
    const task = this.tasks.find((t) => t.taskId === taskId);
    if (!task) throw new Error(`the sim world has no task '${taskId}'`);
    return `[SIMULATED] Task ${task.taskId} kind ${task.kind}: ${task.goal}`;
  }

  harnesses(): Harness[] {
    return baseFirst(this.world.harnesses).map(simHarness);
  }

  async startEpisode(taskId: string, options: { maxTurns: number }): Promise<Episode> {
    const task = this.tasks.find((t) => t.taskId === taskId);
    if (!task) throw new Error(`sim world '${this.world.name}' has no task '${taskId}'`);
    return new SimEpisode({ taskId, kind: task.kind }, this.world, task.requires, task.goal, options.maxTurns);
  }
}
