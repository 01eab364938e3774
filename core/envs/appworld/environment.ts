/**
 * AppWorld as an Environment, through AppWorld's own environment server:
 * the agent writes Python that calls the apps' APIs (`apis.<app>.<api>(...)`),
 * the server runs it in the task's world, and the task's own checks grade the
 * world at the end (task goal completion; scenario goal completion over a
 * set of tasks). Tasks come from APPWORLD_ROOT's data/ folder: the official
 * data, or the fixture world `harness-s appworld setup` builds.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../../errors';
import type { Harness } from '../../harness/harness';
import type { ChatMessage } from '../../policy/trajectory';
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import { AppWorldServerError, AppWorldTimeoutError, EXECUTION_FAILED, type EvaluateOutput, type InitializeOutput } from './client';
import { memoryText } from '../sandbox-cgroup';
import type { AppWorldLimits } from './sandbox';
import { AppWorldServers, AppWorldUngradableError, type Lease } from './servers';

export class AppWorldDataError extends UserError {
  override name = 'AppWorldDataError';
}

/** Output of one /execute the agent sees, at most. */
export const OBSERVATION_CHARS = 12_000;

const TaskSpecs = z.looseObject({
  instruction: z.string(),
  supervisor: z.looseObject({ first_name: z.string(), last_name: z.string(), email: z.string() }),
});

/** The env's system prompt: the base harness's, in the shape of AppWorld's ReAct code agent. */
export const APPWORLD_SYSTEM_PROMPT = [
  'You are an assistant that completes tasks for your supervisor by operating their phone apps (notes, to-do lists, email, music, payments, ...) through their APIs.',
  'You act by writing Python code in one ```python block per reply. The code runs in a persistent interpreter (variables carry over) where `apis.<app>.<api>(...)` calls an API; print what you need to see, and you will get the output back.',
  'Find your way with the API docs app: `apis.api_docs.show_app_descriptions()`, `apis.api_docs.show_api_descriptions(app_name=...)` and `apis.api_docs.show_api_doc(app_name=..., api_name=...)`.',
  "Your supervisor's accounts and passwords are in the supervisor app (`apis.supervisor.show_account_passwords()`); most apps need you to log in first and pass the access token.",
  'When the task is done, call `apis.supervisor.complete_task()`, with `answer=...` when the task asks a question.',
].join('\n');

/** The first user message: who the supervisor is and the task. */
export function appWorldTaskPrompt(task: {
  instruction: string;
  supervisor: { first_name: string; last_name: string; email: string };
}): string {
  return [
    `My name is ${task.supervisor.first_name} ${task.supervisor.last_name}; my email is ${task.supervisor.email}.`,
    `Task: ${task.instruction}`,
  ].join('\n');
}

/** The code of a reply: its first ```python (or bare ```) block; null when it has none. */
export function codeOf(reply: string): string | null {
  const block = /```(?:python|py)?[ \t]*\n([\s\S]*?)```/i.exec(reply);
  return block ? block[1] : null;
}

/** A task's scenario: its id before the `_` (AppWorld's scenario goal completion groups tasks by it). */
export function scenarioOf(taskId: string): string {
  return taskId.split('_')[0];
}

/** AppWorld's two figures over a set of episodes: tasks whose checks all pass, and scenarios whose tasks all do (percent). */
export function appWorldCompletion(results: ReadonlyArray<{ taskId: string; success: boolean }>): {
  taskGoalCompletion: number;
  scenarioGoalCompletion: number;
} {
  if (results.length === 0) return { taskGoalCompletion: 0, scenarioGoalCompletion: 0 };
  const scenarios = new Map<string, boolean>();
  for (const r of results) scenarios.set(scenarioOf(r.taskId), (scenarios.get(scenarioOf(r.taskId)) ?? true) && r.success);
  const percent = (n: number, of: number) => Math.round((1000 * n) / of) / 10;
  return {
    taskGoalCompletion: percent(results.filter((r) => r.success).length, results.length),
    scenarioGoalCompletion: percent([...scenarios.values()].filter(Boolean).length, scenarios.size),
  };
}

export interface AppWorldEpisodeResult {
  taskId: string;
  completed: boolean;
  /** null when the episode was stopped before it could be graded (its server killed). */
  evaluation: EvaluateOutput | null;
  /** Why the episode was stopped, when it was. */
  stopped?: string;
}

/** Seconds the worker gives an /execute past AppWorld's own limit (which the agent's code can switch off) before it kills the sandbox. */
const EXECUTE_GRACE_SECONDS = 5;

class AppWorldEpisode implements Episode {
  private result: AppWorldEpisodeResult | null = null;
  private closed = false;

  constructor(
    readonly task: TaskRef,
    private readonly world: InitializeOutput,
    private readonly lease: Lease,
    private readonly signal?: AbortSignal,
  ) {}

  instruction(): string {
    return appWorldTaskPrompt(this.world);
  }

  opening(): ChatMessage[] {
    return [{ role: 'user', content: this.instruction() }];
  }

  get ending(): AppWorldEpisodeResult | null {
    return this.result;
  }

  /** The sandbox's uid as the host sees it (null when the worker is not root): its processes are the ones of that uid. */
  get sandboxUid(): number | null {
    return this.lease.uid;
  }

  /** The most memory the server's sandbox held at once, all its processes together (its cgroup's count; null without one). */
  get sandboxPeakMemoryBytes(): number | null {
    return this.lease.peakMemoryBytes();
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.result) throw new Error(`episode ${this.task.taskId} has ended`);
    const code = codeOf(action);
    if (code === null) {
      return {
        observation: 'Format error: no ```python code block in the reply.',
        kind: 'error',
        done: true,
        success: false,
        reward: 0,
        failureType: 'format_error',
      };
    }
    const { client, limits } = this.lease;
    let reply;
    try {
      reply = await client.execute(this.task.taskId, code, {
        timeoutMs: (limits.executeSeconds + EXECUTE_GRACE_SECONDS) * 1000,
        maxBytes: limits.replyBytes,
        signal: this.signal,
      });
    } catch (err) {
      this.signal?.throwIfAborted();
      if (!(err instanceof AppWorldServerError)) throw err;
      if (this.lease.memoryLimitReached()) return this.overMemory('');
      // The agent's code runs in the server: a server that stops answering is the agent's doing, and ends its episode.
      const why =
        err instanceof AppWorldTimeoutError
          ? `the code ran past the ${limits.executeSeconds} s limit`
          : `the AppWorld server stopped answering (${err.message})`;
      return this.stop(`Execution stopped: ${why}; the sandbox was killed and the episode ends.`);
    }
    const { output } = reply;
    // Read now, not left to the worker's watch: the reply may come before the watch sees the kill.
    if (this.lease.memoryLimitReached()) return this.overMemory(output.slice(0, OBSERVATION_CHARS));
    const shown = reply.cut
      ? `${output.slice(0, OBSERVATION_CHARS)}\n[output cut: the reply was over ${limits.replyBytes} bytes, and reading stopped there]`
      : output.length > OBSERVATION_CHARS
        ? `${output.slice(0, OBSERVATION_CHARS)}\n[output cut: ${output.length} characters in all]`
        : output;
    let completed: boolean;
    try {
      completed = await client.taskCompleted(this.task.taskId, this.signal);
    } catch (err) {
      this.signal?.throwIfAborted();
      if (!(err instanceof AppWorldServerError)) throw err;
      return this.stop(`${shown}\nThe AppWorld server stopped answering (${err.message}); the episode ends.`);
    }
    if (completed) return this.finish(true, shown);
    return { observation: shown, kind: output.startsWith(EXECUTION_FAILED) ? 'error' : output.trim() === '' ? 'empty' : 'ok', done: false };
  }

  /** Ends the episode ungraded: its server is killed, nothing it left is looked at. */
  private stop(observation: string): StepOutcome {
    this.lease.release();
    this.result = { taskId: this.task.taskId, completed: false, evaluation: null, stopped: observation };
    return { observation, kind: 'error', done: true, success: false, reward: 0, failureType: 'execution_error' };
  }

  /** Code whose processes together ran the sandbox out of memory ends the episode ungraded (its server was killed). */
  private overMemory(output: string): StepOutcome {
    const limit = memoryText(this.lease.limits.sandboxMemoryBytes);
    return this.stop(
      `${output ? `${output}\n` : ''}Execution stopped: the sandbox's memory limit of ${limit} was reached (all of its processes together); the sandbox was killed and the episode ends.`,
    );
  }

  outOfTurns(): Promise<StepOutcome> {
    return this.finish(false, 'Out of turns.');
  }

  /** The task's checks on the world as the agent left it (AppWorld grades the state, completed or not), in an evaluator that never ran the agent's code. */
  private async finish(completed: boolean, observation: string): Promise<StepOutcome> {
    let evaluation: EvaluateOutput;
    try {
      evaluation = await this.lease.evaluate(this.signal);
    } catch (err) {
      // A saved world the evaluator cannot grade is the agent's doing (its code wrote it): a failure, not a retry.
      if (!(err instanceof AppWorldUngradableError)) throw err;
      this.result = { taskId: this.task.taskId, completed, evaluation: null, stopped: err.message };
      return {
        observation: `${observation}\nNot graded: ${err.message.split('\n')[0]}`,
        kind: 'error',
        done: true,
        success: false,
        reward: 0,
        failureType: 'execution_error',
      };
    }
    this.result = { taskId: this.task.taskId, completed, evaluation };
    const failed = evaluation.failures.map((f) => f.requirement.trim().split('\n')[0]);
    return {
      observation: `${observation}\n${completed ? 'Task completed' : 'Not completed'}: ${evaluation.success ? 'success' : 'fail'} (${evaluation.num_tests - evaluation.failures.length}/${evaluation.num_tests} checks pass${failed.length ? `; failed: ${failed.join('; ')}` : ''})`,
      kind: evaluation.success ? 'ok' : 'error',
      done: true,
      success: evaluation.success,
      reward: evaluation.success ? 1 : 0,
      failureType: evaluation.success ? null : completed ? 'wrong_answer' : 'turn_limit',
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // The server is one episode's: it is killed, never reused.
    this.lease.release();
  }
}

export interface AppWorldEnvironmentOptions {
  /** The `appworld` command of the venv the package is installed in. */
  appworld: string;
  /** APPWORLD_ROOT (holds data/). */
  root: string;
  /** APPWORLD_CACHE of that install. */
  cache?: string;
  /** The dataset (data/datasets/<name>.txt) whose tasks the env offers. */
  dataset: string;
  /** Episodes (servers) at once. */
  servers: number;
  harnesses: Harness[];
  /** Limits of the sandboxes (sandbox.ts), each defaulting to DEFAULT_APPWORLD_LIMITS. */
  limits?: Partial<AppWorldLimits>;
}

export class AppWorldEnvironment implements Environment {
  readonly id = 'appworld';
  private readonly tasks: TaskRef[];
  private readonly servers: AppWorldServers;

  constructor(private readonly options: AppWorldEnvironmentOptions) {
    const list = path.join(options.root, 'data', 'datasets', `${options.dataset}.txt`);
    if (!existsSync(list)) {
      throw new AppWorldDataError(
        `AppWorld: no dataset '${options.dataset}' under ${options.root} (looked for ${list}); APPWORLD_ROOT must hold AppWorld's data/ folder`,
      );
    }
    const ids = readFileSync(list, 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter(Boolean);
    if (ids.length === 0) throw new AppWorldDataError(`AppWorld: ${list} lists no task`);
    this.tasks = ids.map((taskId) => ({ taskId, kind: this.kindOf(taskId) }));
    this.servers = new AppWorldServers({
      appworld: options.appworld,
      root: options.root,
      cache: options.cache,
      max: options.servers,
      limits: options.limits,
    });
  }

  /** AppWorld reports by difficulty: the task's kind is its difficulty level, from its ground truth when there. */
  private kindOf(taskId: string): string {
    const metadata = path.join(this.options.root, 'data', 'tasks', taskId, 'ground_truth', 'metadata.json');
    try {
      const difficulty = (JSON.parse(readFileSync(metadata, 'utf8')) as { difficulty?: unknown }).difficulty;
      return typeof difficulty === 'number' ? `difficulty_${difficulty}` : 'appworld';
    } catch {
      return 'appworld';
    }
  }

  listTasks(): TaskRef[] {
    return this.tasks;
  }

  describeTask(taskId: string): string {
    const file = path.join(this.options.root, 'data', 'tasks', taskId, 'specs.json');
    let specs: z.infer<typeof TaskSpecs>;
    try {
      specs = TaskSpecs.parse(JSON.parse(readFileSync(file, 'utf8')));
    } catch (err) {
      throw new AppWorldDataError(`AppWorld task ${taskId}: cannot read ${file}: ${(err as Error).message}`);
    }
    return appWorldTaskPrompt(specs);
  }

  harnesses(): Harness[] {
    return this.options.harnesses;
  }

  async startEpisode(taskId: string, options: { maxTurns: number; signal?: AbortSignal }): Promise<AppWorldEpisode> {
    const task = this.tasks.find((t) => t.taskId === taskId);
    if (!task) throw new AppWorldDataError(`AppWorld: dataset '${this.options.dataset}' has no task '${taskId}'`);
    const lease = await this.servers.lease(taskId, options.signal);
    try {
      // The server gets no ground truth: the evaluator grades the episode (servers.ts).
      const world = await lease.client.initialize(
        taskId,
        { experimentName: lease.experiment, loadGroundTruth: false, timeoutSeconds: lease.limits.executeSeconds },
        options.signal,
      );
      return new AppWorldEpisode(task, world, lease, options.signal);
    } catch (err) {
      lease.release();
      throw err;
    }
  }

  /** Sandboxes running now: episodes' servers, spares, evaluators (for tests and status). */
  get runningServers(): number {
    return this.servers.size;
  }

  async close(): Promise<void> {
    await this.servers.close();
  }
}

export type { AppWorldEpisode };
