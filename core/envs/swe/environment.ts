/**
 * SWE as an Environment: each episode a fresh copy of an instance's tree in
 * a bubblewrap sandbox, the agent's tools (shell, editor, submit) called
 * through the OpenAI tools API, and SWE-bench's scoring of the final diff.
 */
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import type { Harness } from '../../harness/harness';
import type { ToolDefinition } from '../../policy/trajectory';
import { instanceKind, SweDataError, type SweInstance } from './instances';
import { loadSweData } from './build';
import { evaluatePatch, unscored, type SweEvaluation } from './scoring';
import { passes } from './pytest-log';
import { EditorError, FileEditor, parseSweAction, TOOLS } from './tools';
import { sweepWorkspaces, Workspace } from './workspace';
import { DEFAULT_LIMITS, WORKSPACE, type SandboxLimits } from './sandbox';
import { memoryText } from '../sandbox-cgroup';

/** Workspaces older than this are a dead worker's leftovers (episodes last minutes). */
export const STALE_WORKSPACE_MS = 6 * 60 * 60 * 1000;

/** Output of one command the agent sees, at most (the rest is cut with a note). */
export const OBSERVATION_BYTES = 16 * 1024;

/** The env's system prompt: the base harness's, as OpenHands' CodeAct agent has one. */
export const SWE_SYSTEM_PROMPT = [
  'You are a software engineering agent. You work in a Python repository checked out at /workspace, through tools:',
  '- execute_bash runs a shell command in the repository (a sandbox with no network; packages cannot be installed);',
  '- str_replace_editor views, creates and edits files;',
  "- submit ends your work: the repository's changes (its git diff) are your answer.",
  'Make the smallest change to the library code that resolves the issue. Do not change the existing tests.',
].join('\n');

/** The task as the agent sees it. */
export function sweTaskPrompt(instance: SweInstance): string {
  return [
    `A Python repository (${instance.repo}, version ${instance.version ?? '?'}) is checked out at ${WORKSPACE}. A user reported this issue:`,
    '',
    '<issue>',
    instance.problem_statement.trim(),
    '</issue>',
    '',
    `Change the code under ${WORKSPACE} so that the issue is resolved. Tests that check the fix already exist on the maintainers' side; ` +
      'you do not need to write them, and you should not edit existing test files. When you are done, call submit.',
  ].join('\n');
}

export interface SweEpisodeResult {
  instanceId: string;
  submitted: boolean;
  patch: string;
  evaluation: SweEvaluation;
}

class SweEpisode implements Episode {
  private readonly editor: FileEditor;
  private result: SweEpisodeResult | null = null;
  private closed = false;

  constructor(
    readonly task: TaskRef,
    private readonly instance: SweInstance,
    private readonly workspace: Workspace,
    private readonly limits: Partial<SandboxLimits>,
    private readonly signal?: AbortSignal,
  ) {
    this.editor = new FileEditor(workspace.repo, OBSERVATION_BYTES);
  }

  instruction(): string {
    return sweTaskPrompt(this.instance);
  }

  tools(): ToolDefinition[] {
    return TOOLS;
  }

  /** The scored ending, once the episode has one. */
  get ending(): SweEpisodeResult | null {
    return this.result;
  }

  async step(actionText: string): Promise<StepOutcome> {
    if (this.result) throw new Error(`episode ${this.instance.instance_id} has ended`);
    const parsed = parseSweAction(actionText);
    if (!parsed.ok) {
      return {
        observation: `Format error: ${parsed.error}`,
        kind: 'error',
        done: true,
        success: false,
        reward: 0,
        failureType: 'format_error',
      };
    }
    const { action } = parsed;
    switch (action.tool) {
      case 'execute_bash': {
        const result = await this.workspace.exec(
          action.arguments.command,
          { timeoutSeconds: action.arguments.timeout ?? 120, maxOutputBytes: OBSERVATION_BYTES },
          this.signal,
        );
        if (result.workspaceOverBound) return this.overBound(result.output);
        if (result.memoryLimitReached) return this.overMemory(result.output);
        const notes = [
          result.outputTruncated ? `[output cut: ${result.outputBytes} bytes in all, the first ${OBSERVATION_BYTES} shown]` : '',
          result.timedOut ? `[killed: the command ran over ${action.arguments.timeout ?? 120} s]` : '',
          result.flooded ? '[killed: the command wrote more output than allowed]' : '',
          result.exitCode !== null ? `[exit code ${result.exitCode}]` : '',
        ].filter(Boolean);
        return {
          observation: `${result.output}${result.output.endsWith('\n') || !result.output ? '' : '\n'}${notes.join('\n')}`,
          kind: result.exitCode === 0 ? 'ok' : 'error',
          done: false,
        };
      }
      case 'str_replace_editor':
        try {
          return { observation: await this.editor.run(action.arguments), kind: 'ok', done: false };
        } catch (err) {
          if (err instanceof EditorError) return { observation: `Error: ${err.message}`, kind: 'error', done: false };
          throw err;
        }
      case 'submit':
        return this.finish(true);
    }
  }

  /** A workspace grown past its bound (a disk filled on purpose or by a runaway command) ends the episode unscored. */
  private overBound(output: string): StepOutcome {
    const why = 'the workspace grew past its bound (disk use or number of files): the command was stopped and the episode ended';
    this.result = { instanceId: this.instance.instance_id, submitted: false, patch: '', evaluation: unscored(this.instance, why) };
    return {
      observation: `${output}${output.endsWith('\n') || !output ? '' : '\n'}[${why}]`,
      kind: 'error',
      done: true,
      success: false,
      reward: 0,
      failureType: 'execution_error',
    };
  }

  /** A command whose sandbox ran out of memory (all its processes together) ends the episode unscored. */
  private overMemory(output: string): StepOutcome {
    const why = `the sandbox's memory limit of ${memoryText(this.workspaceMemory())} was reached (all of the command's processes together): the command was killed and the episode ended`;
    this.result = { instanceId: this.instance.instance_id, submitted: false, patch: '', evaluation: unscored(this.instance, why) };
    return {
      observation: `${output}${output.endsWith('\n') || !output ? '' : '\n'}[${why}]`,
      kind: 'error',
      done: true,
      success: false,
      reward: 0,
      failureType: 'execution_error',
    };
  }

  private workspaceMemory(): number {
    return this.limits.sandboxMemoryBytes ?? DEFAULT_LIMITS.sandboxMemoryBytes;
  }

  outOfTurns(): Promise<StepOutcome> {
    return this.finish(false);
  }

  /** Scores the workspace's diff as SWE-bench does (a fresh tree, the test patch, the instance's tests). */
  private async finish(submitted: boolean): Promise<StepOutcome> {
    const { patch, error } = await this.workspace.diff(this.signal);
    const evaluation = error === null ? await evaluatePatch(this.instance, patch, this.signal) : unscored(this.instance, error);
    this.result = { instanceId: this.instance.instance_id, submitted, patch, evaluation };
    const summary = evaluation.applied
      ? `FAIL_TO_PASS ${evaluation.failToPass.passed}/${evaluation.failToPass.total}, PASS_TO_PASS ${evaluation.passToPass.passed}/${evaluation.passToPass.total}${evaluation.error ? `; ${evaluation.error}` : ''}`
      : evaluation.error;
    // The per-test outcome stays with the trajectory: every FAIL_TO_PASS/PASS_TO_PASS test that did not pass, with its status.
    const notPassing = Object.entries(evaluation.tests).filter(
      ([id, status]) =>
        (this.instance.FAIL_TO_PASS.includes(id) || this.instance.PASS_TO_PASS.includes(id)) &&
        !passes(status === 'MISSING' ? undefined : status),
    );
    const listed = notPassing.slice(0, 50).map(([id, status]) => `  ${status} ${id}`);
    return {
      observation: [
        `${submitted ? 'Submitted' : 'Out of turns'}: ${evaluation.resolved ? 'resolved' : 'not resolved'} (${summary})`,
        ...(listed.length
          ? ['Tests not passing:', ...listed, ...(notPassing.length > 50 ? [`  ... and ${notPassing.length - 50} more`] : [])]
          : []),
      ].join('\n'),
      kind: evaluation.resolved ? 'ok' : 'error',
      done: true,
      success: evaluation.resolved,
      reward: evaluation.resolved ? 1 : 0,
      failureType: evaluation.resolved ? null : evaluation.applied ? 'wrong_answer' : 'execution_error',
    };
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.workspace.close();
  }
}

export interface SweEnvironmentOptions {
  /** An instance set (built by `swe setup`) or SWE-bench JSONL; or `instances` already loaded. */
  dataFile?: string;
  instances?: SweInstance[];
  harnesses: Harness[];
  /** Limits of every command's sandbox (the config's sandbox size), each defaulting to DEFAULT_LIMITS. */
  limits?: Partial<SandboxLimits>;
}

export class SweEnvironment implements Environment {
  readonly id = 'swe';
  private readonly instances: SweInstance[];
  private readonly byId: Map<string, SweInstance>;
  private swept = false;

  constructor(private readonly options: SweEnvironmentOptions) {
    this.instances = options.instances ?? loadSweData(options.dataFile ?? '');
    this.byId = new Map(this.instances.map((i) => [i.instance_id, i]));
  }

  listTasks(): TaskRef[] {
    return this.instances.map((i) => ({ taskId: i.instance_id, kind: instanceKind(i) }));
  }

  describeTask(taskId: string): string {
    return sweTaskPrompt(this.instance(taskId));
  }

  instance(taskId: string): SweInstance {
    const instance = this.byId.get(taskId);
    if (!instance) throw new SweDataError(`SWE has no instance '${taskId}'`);
    return instance;
  }

  harnesses(): Harness[] {
    return this.options.harnesses;
  }

  async startEpisode(taskId: string, options: { maxTurns: number; signal?: AbortSignal }): Promise<SweEpisode> {
    const instance = this.instance(taskId);
    // Leftovers of workers that died are removed once per process, before its first episode.
    if (!this.swept) {
      this.swept = true;
      sweepWorkspaces({ olderThanMs: STALE_WORKSPACE_MS });
    }
    const limits = this.options.limits ?? {};
    const workspace = Workspace.create(instance, taskId, limits);
    return new SweEpisode({ taskId, kind: instanceKind(instance) }, instance, workspace, limits, options.signal);
  }
}

export type { SweEpisode };
