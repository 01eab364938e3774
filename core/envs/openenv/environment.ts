/**
 * Episodes against an OpenEnv server (docs/openenv.md): one WebSocket session
 * per episode, reset with the task's reset arguments, the observation shown
 * to the policy as text, the policy's reply sent as the action's text field,
 * reward and done from the server; or, for an MCP env, its tools offered as
 * function calls. The tasks come from a task file (the shipped keypad env's
 * by default).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../../errors';
import type { Harness } from '../../harness/harness';
import type { ToolDefinition } from '../../policy/trajectory';
import { formatZodError } from '../../zod-errors';
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import {
  describeAddress,
  OpenEnvError,
  OpenEnvProtocolError,
  OpenEnvSession,
  OpenEnvTimeoutError,
  type OpenEnvStepResult,
  type OpenEnvTool,
} from './client';
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

/**
 * The observation as the policy reads it: the configured field, else text,
 * prompt or message when a string, else a tool call's outcome (an MCP env's
 * CallToolObservation: its error, or its result's text), else compact JSON
 * without the metadata.
 */
export function renderObservation(observation: Record<string, unknown>, field: string | undefined): string {
  if (field !== undefined) {
    const value = observation[field];
    if (typeof value !== 'string')
      throw new OpenEnvProtocolError(
        `malformed observation: env.observationField '${field}' is ${value === undefined ? 'missing' : `not a string (${typeof value})`} in ${JSON.stringify(observation).slice(0, 300)}`,
      );
    return value;
  }
  for (const name of ['text', 'prompt', 'message']) if (typeof observation[name] === 'string') return observation[name] as string;
  if (typeof observation.tool_name === 'string' && 'result' in observation) return renderToolOutcome(observation);
  const { metadata: _metadata, ...rest } = observation;
  return JSON.stringify(rest);
}

/** A CallToolObservation as text: `error (<type>): <message>`, or the result's text content, its data, or its JSON. */
function renderToolOutcome(observation: Record<string, unknown>): string {
  const error = observation.error as { error_type?: unknown; message?: unknown } | null | undefined;
  if (error) return `error (${String(error.error_type ?? 'tool_error')}): ${String(error.message ?? '')}`;
  const result = observation.result as Record<string, unknown> | string | null | undefined;
  if (typeof result === 'string') return result;
  if (result && Array.isArray(result.content)) {
    const texts = result.content.flatMap((c: { type?: unknown; text?: unknown }) =>
      c?.type === 'text' && typeof c.text === 'string' ? [c.text] : [],
    );
    const text = texts.join('\n');
    return result.is_error === true ? `error: ${text}` : text;
  }
  if (result && 'data' in result) return typeof result.data === 'string' ? result.data : JSON.stringify(result.data);
  return JSON.stringify(result ?? null);
}

/** A tool as the policy is offered it (OpenAI tools API). */
export function toolDefinition(tool: OpenEnvTool): ToolDefinition {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.input_schema } };
}

/**
 * The action a reply stands for. Text: `{<actionField>: reply}`. Tools: the
 * runtime's `{"tool", "arguments"}` as openenv's `call_tool` action; a reply
 * that is not a call of a listed tool is a string saying why, for the policy.
 */
export function openEnvAction(
  reply: string,
  config: Pick<OpenEnvEnvConfig, 'actions' | 'actionField'>,
  tools: readonly OpenEnvTool[],
): Record<string, unknown> | string {
  if (config.actions === 'text') return { [config.actionField]: reply };
  const names = tools.map((t) => t.name).join(', ');
  let call: { tool?: unknown; arguments?: unknown };
  try {
    call = JSON.parse(reply) as typeof call;
  } catch {
    return `Act by calling one of the tools (${names}); a reply in text does nothing here.`;
  }
  if (typeof call?.tool !== 'string') return `Act by calling one of the tools (${names}); a reply in text does nothing here.`;
  if (!tools.some((t) => t.name === call.tool)) return `There is no tool '${call.tool}'; the tools are: ${names}.`;
  const args = call.arguments ?? {};
  if (typeof args !== 'object' || Array.isArray(args) || args === null)
    return `The arguments of ${call.tool} must be a JSON object, not ${JSON.stringify(args).slice(0, 200)}.`;
  return { type: 'call_tool', tool_name: call.tool, arguments: args };
}

export interface OpenEnvEnvironmentOptions {
  config: Pick<OpenEnvEnvConfig, 'actions' | 'actionField' | 'observationField' | 'successReward' | 'stepSeconds'>;
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
    /** The MCP env's tools, when the policy acts by tool calls. */
    private readonly offered: OpenEnvTool[],
  ) {}

  instruction(): string {
    return this.firstObservation;
  }

  tools(): ToolDefinition[] {
    return this.offered.map(toolDefinition);
  }

  async step(action: string): Promise<StepOutcome> {
    if (this.done) throw new Error(`OpenEnv episode ${this.task.taskId} is over`);
    const sent = openEnvAction(action, this.options, this.offered);
    if (typeof sent === 'string') return { observation: sent, kind: 'error', done: false };
    let result: OpenEnvStepResult;
    try {
      result = await this.session.step(sent);
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
    await this.slot.release();
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
          const tools = this.options.config.actions === 'tools' ? await offeredTools(session, slot) : [];
          return new OpenEnvEpisode({ taskId, kind: task.kind }, opening, session, slot, this.options.config, tools);
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
      await slot.release();
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

/** An MCP env's tools; a server that lists none (or refuses to: not an MCP env) is a config error. */
async function offeredTools(session: OpenEnvSession, slot: SessionSlot): Promise<OpenEnvTool[]> {
  const where = describeAddress(slot.address);
  let tools: OpenEnvTool[];
  try {
    tools = await session.listTools();
  } catch (err) {
    if (!(err instanceof OpenEnvProtocolError) || err.code === undefined) throw err;
    throw new OpenEnvError(
      `env.actions is 'tools', but the OpenEnv server ${where} refused to list its tools (an MCP env, served with CallToolAction as its action, lists them): ${err.message}; use actions 'text' for an env that takes text`,
    );
  }
  if (tools.length === 0) throw new OpenEnvError(`env.actions is 'tools', but the OpenEnv server ${where} lists no tools`);
  return tools;
}

export const KEYPAD_TASKS_FILE = path.join(__dirname, 'keypad', 'tasks.json');
