/**
 * Episodes against an OpenEnv server (docs/openenv.md): one WebSocket session
 * per episode, reset with the task's reset arguments, the observation shown
 * to the policy as text, the policy's reply sent as the action's text field,
 * reward and done from the server. The tasks come from a task file (the
 * shipped keypad env's by default; `harness-s openenv tasks` writes one from
 * a server's Task API).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../../errors';
import type { Harness } from '../../harness/harness';
import { formatZodError } from '../../zod-errors';
import type { Environment, Episode, StepOutcome } from '../environment';
import type { TaskRef } from '../task';
import { OpenEnvProtocolError, OpenEnvSession, OpenEnvTimeoutError, type OpenEnvStepResult } from './client';
import type { OpenEnvEnvConfig } from './config';
import type { SessionSlot } from './servers';

export const OPENENV_ENV_ID = 'openenv';

/** Tries at opening a session on a server that answers it is full. */
const CAPACITY_ATTEMPTS = 8;

export const OpenEnvTaskFile = z.object({
  name: z.string().optional(),
  tasks: z
    .array(
      z.object({
        id: z.string().min(1),
        kind: z.string().min(1),
        /** The task in words (for voter LLMs); the reset observation is what the policy sees. */
        prompt: z.string().optional(),
        /** What reset is sent: the server's own arguments (task_id, or split and index, seed, ...). */
        reset: z.record(z.string(), z.unknown()).default({}),
      }),
    )
    .min(1),
});
export type OpenEnvTask = z.infer<typeof OpenEnvTaskFile>['tasks'][number];

export class OpenEnvTaskFileError extends UserError {
  override name = 'OpenEnvTaskFileError';
}

export function loadOpenEnvTasks(file: string): OpenEnvTask[] {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new OpenEnvTaskFileError(`OpenEnv task file ${file}: cannot read it as JSON: ${(err as Error).message}`);
  }
  const parsed = OpenEnvTaskFile.safeParse(raw);
  if (!parsed.success) throw new OpenEnvTaskFileError(`OpenEnv task file ${file} is invalid:\n${formatZodError(parsed.error)}`);
  const ids = new Set<string>();
  for (const task of parsed.data.tasks) {
    if (ids.has(task.id)) throw new OpenEnvTaskFileError(`OpenEnv task file ${file}: task id '${task.id}' appears twice`);
    ids.add(task.id);
  }
  return parsed.data.tasks;
}

/** The observation as the policy reads it: the configured field, else text, prompt or message when a string, else compact JSON. */
export function renderObservation(observation: Record<string, unknown>, field: string | undefined): string {
  if (field !== undefined) {
    const value = observation[field];
    if (typeof value !== 'string') throw new OpenEnvProtocolError(`malformed observation: env.observationField '${field}' is ${value === undefined ? 'missing' : `not a string (${typeof value})`} in ${JSON.stringify(observation).slice(0, 300)}`);
    return value;
  }
  for (const name of ['text', 'prompt', 'message']) if (typeof observation[name] === 'string') return observation[name] as string;
  const { metadata: _metadata, ...rest } = observation;
  return JSON.stringify(rest);
}

export interface OpenEnvEnvironmentOptions {
  config: Pick<OpenEnvEnvConfig, 'actionField' | 'observationField' | 'successReward' | 'stepSeconds'>;
  tasks: OpenEnvTask[];
  harnesses: Harness[];
  /** A session slot on a server (remote, or started by the worker). */
  acquire(signal?: AbortSignal): Promise<SessionSlot>;
  /** Stops what the env started. */
  close?(): Promise<void>;
}

class OpenEnvEpisode implements Episode {
  private done = false;

  constructor(
    readonly task: TaskRef,
    private readonly firstObservation: string,
    private readonly session: OpenEnvSession,
    private readonly slot: SessionSlot,
    private readonly options: OpenEnvEnvironmentOptions['config'],
  ) {}

  instruction(): string {
    return this.firstObservation;
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.done) throw new Error(`OpenEnv episode ${this.task.taskId} is over`);
    let result: OpenEnvStepResult;
    try {
      result = await this.session.step({ [this.options.actionField]: action });
    } catch (err) {
      if (err instanceof OpenEnvProtocolError && (err.code === 'VALIDATION_ERROR' || err.code === 'EXECUTION_ERROR')) {
        // The server refused this action (its schema, or its step raised): the policy sees why and may try again.
        return { observation: err.message, kind: 'error', done: false };
      }
      if (err instanceof OpenEnvTimeoutError) {
        await this.close();
        return { observation: err.message, kind: 'error', done: true, success: false, reward: 0, failureType: 'execution_error' };
      }
      throw err;
    }
    const observation = renderObservation(result.observation, this.options.observationField);
    if (!result.done) return { observation, done: false };
    this.done = true;
    const reward = result.reward ?? 0;
    const success = reward >= this.options.successReward;
    await this.close();
    return { observation, done: true, success, reward, failureType: success ? null : 'wrong_answer' };
  }

  async close(): Promise<void> {
    this.done = true;
    // The slot is free once the server has dropped the session, not before: the server counts it until then.
    await this.session.close();
    this.slot.release();
  }
}

export class OpenEnvEnvironment implements Environment {
  readonly id = OPENENV_ENV_ID;
  private readonly byId: Map<string, OpenEnvTask>;

  constructor(private readonly options: OpenEnvEnvironmentOptions) {
    this.byId = new Map(options.tasks.map((t) => [t.id, t]));
  }

  listTasks(): TaskRef[] {
    return this.options.tasks.map((t) => ({ taskId: t.id, kind: t.kind }));
  }

  describeTask(taskId: string): string {
    const task = this.task(taskId);
    return task.prompt ?? `OpenEnv task ${task.id} (${task.kind}), reset with ${JSON.stringify(task.reset)}`;
  }

  harnesses(): Harness[] {
    return this.options.harnesses;
  }

  async startEpisode(taskId: string, options: { maxTurns: number; signal?: AbortSignal }): Promise<Episode> {
    const task = this.task(taskId);
    const slot = await this.options.acquire(options.signal);
    let session: OpenEnvSession | undefined;
    try {
      for (let attempt = 1; ; attempt++) {
        session = await OpenEnvSession.open(slot.address, { timeoutMs: this.options.config.stepSeconds * 1000, signal: options.signal });
        try {
          const first = await session.reset(task.reset);
          const opening = renderObservation(first.observation, this.options.config.observationField);
          return new OpenEnvEpisode({ taskId, kind: task.kind }, opening, session, slot, this.options.config);
        } catch (err) {
          // A server shared with other clients may be full for a moment: its sessions end, so try again a few times.
          if (!(err instanceof OpenEnvProtocolError && err.code === 'CAPACITY_REACHED') || attempt >= CAPACITY_ATTEMPTS) throw err;
          await session.close();
          options.signal?.throwIfAborted();
          await new Promise((resolve) => setTimeout(resolve, 250 * attempt));
        }
      }
    } catch (err) {
      await session?.close();
      slot.release();
      throw err;
    }
  }

  async close(): Promise<void> {
    await this.options.close?.();
  }

  private task(taskId: string): OpenEnvTask {
    const task = this.byId.get(taskId);
    if (!task) throw new Error(`the OpenEnv tasks have no task '${taskId}'`);
    return task;
  }
}

export const KEYPAD_TASKS_FILE = path.join(__dirname, 'keypad', 'tasks.json');
