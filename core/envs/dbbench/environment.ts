/**
 * DBBench as an Environment: AgentBench's tasks and protocol, each episode
 * in its own sandbox on a MySQL-compatible server.
 */
import type { Environment, Episode, StepOutcome } from '../../harness/environment';
import type { TaskRef } from '../../harness/task';
import type { Harness } from '../../harness/harness';
import {
  agentBenchOpening,
  agentBenchTaskPrompt,
  parseAgentBenchAction,
  parseFinalAnswer,
  type DbBenchAction,
} from './agentbench-protocol';
import { SandboxHost, type Sandbox, type SandboxHostOptions } from './sandbox';
import { scoreEpisode, tableHashQuery, type AgentBenchStatus, type AnswerMatching, type EpisodeEnding } from './scoring';
import type { StatementResult } from './statement';
import { isDmlType, loadDbBenchTasks, type DbBenchTask } from './tasks';
import type { FailureType } from '../../policy/trajectory';

export type ObservationKind = 'ok' | 'error' | 'empty';

/** A step's outcome with how the env judged its observation (for harness turn hints). */
export interface DbBenchStepOutcome extends StepOutcome {
  kind: ObservationKind;
}

/** What an eval needs of a finished episode to build AgentBench's per-type table. */
export interface DbBenchEpisodeResult {
  taskId: string;
  kind: string;
  type: string;
  ending: EpisodeEnding;
  status: AgentBenchStatus;
  /** AgentBench's recorded answer: the table hash for DML, the Final Answer text otherwise. */
  answer: string;
  correct: boolean;
  failureType: FailureType | null;
  /** Agent actions the episode took (harness actions excluded), and the SQL statements among them. */
  turns: number;
  statements: number;
}

export interface DbBenchEnvironmentOptions {
  /** The JSONL task file; or `tasks` already loaded. */
  dataFile?: string;
  tasks?: DbBenchTask[];
  /** Admin URL of the server; the local server as root when absent. Ignored when `host` is given. */
  adminUrl?: string;
  /** A host to share (its pool, limits and prefix); the env then does not close it. */
  host?: SandboxHost;
  sandbox?: Omit<SandboxHostOptions, 'adminUrl'>;
  /** Query answer matching: v0.2's `exact` (default) or the later `normalized`. */
  scoring?: AnswerMatching;
  /** The harness pool (base first); built from specs by the caller. */
  harnesses?: Harness[];
}

class DbBenchEpisode implements Episode {
  private turns = 0;
  private statements = 0;
  private lastStatementFailed = false;
  private finished: DbBenchEpisodeResult | null = null;
  private closed = false;

  constructor(
    readonly task: TaskRef,
    private readonly source: DbBenchTask,
    private readonly sandbox: Sandbox,
    private readonly maxTurns: number,
    private readonly matching: AnswerMatching,
  ) {}

  /** The episode's database and user (for logs and checks). */
  get sandboxName(): string {
    return this.sandbox.name;
  }

  instruction(): string {
    return agentBenchTaskPrompt(this.source.entry);
  }

  /** AgentBench's opening: its instruction as a user turn, the agent's "Ok.", then the task. */
  opening() {
    return agentBenchOpening(this.source.entry);
  }

  /**
   * One assistant message. Agent turns count toward `maxTurns` (assistant
   * turns: AgentBench's 15 rounds are 16 turns, see agentBenchTurnBudget); on
   * the last one, as in AgentBench after its last round, only a Final Answer
   * counts and nothing is executed. Harness actions (`byHarness`) run SQL
   * without spending turns.
   */
  async step(actionText: string, options: { byHarness?: boolean } = {}): Promise<DbBenchStepOutcome> {
    if (this.finished || this.closed) throw new Error(`DBBench episode ${this.task.taskId} is over; no more actions`);
    if (!options.byHarness) this.turns += 1;
    const lastTurn = !options.byHarness && this.turns >= this.maxTurns;
    if (lastTurn) {
      const answer = parseFinalAnswer(actionText);
      return answer === null ? this.finish('turn_limit') : this.finish('answer', answer);
    }
    const action: DbBenchAction = parseAgentBenchAction(actionText);
    if (action.kind === 'answer') return this.finish('answer', action.raw);
    if (action.kind === 'invalid') return this.finish('invalid', undefined, action.reason);
    const result = await this.sandbox.execute(action.sql);
    if (!options.byHarness) {
      this.statements += 1;
      this.lastStatementFailed = result.outcome === 'error';
    }
    if (result.refused) return this.finish('refused', undefined, result.refused);
    if (result.capExceeded) return this.finish('resource_limit', undefined, result.capExceeded);
    return { observation: result.observation, done: false, kind: observationKind(result) };
  }

  private async finish(ending: EpisodeEnding, answer?: string, reason?: string): Promise<DbBenchStepOutcome> {
    const { entry, type } = this.source;
    let tableHash: string | undefined;
    let tableRefused: string | undefined;
    try {
      // A database past its cap, or holding a refused table, is not read: the episode failed, and reading it is what the checks guard.
      if (isDmlType(type) && ending !== 'resource_limit' && ending !== 'refused') {
        const verdict = await this.sandbox.scoreTable(entry.table, tableHashQuery(entry.table));
        if (verdict.kind === 'hash') tableHash = verdict.hash;
        else tableRefused = verdict.reason;
      }
    } finally {
      await this.close();
    }
    const score = scoreEpisode({
      type,
      label: entry.label,
      answerMd5: entry.answer_md5,
      ending,
      answer,
      tableHash,
      tableRefused,
      refusal: ending === 'refused' ? reason : undefined,
      lastStatementFailed: this.lastStatementFailed,
      matching: this.matching,
    });
    this.finished = {
      taskId: this.task.taskId,
      kind: this.task.kind,
      type,
      ending,
      status: score.status,
      answer: score.answer,
      correct: score.correct,
      failureType: score.failureType,
      turns: this.turns,
      statements: this.statements,
    };
    const verdict = score.correct ? 'correct' : 'not correct';
    const observation =
      ending === 'invalid'
        ? `Format error: ${reason}. The episode ends here (${verdict}).`
        : ending === 'turn_limit'
          ? `Turn limit reached without a Final Answer (${verdict}).`
          : ending === 'resource_limit' || ending === 'refused'
            ? `The episode ends: ${reason} (${verdict}).`
            : `Answer recorded (${verdict}).`;
    return {
      observation,
      done: true,
      success: score.correct,
      reward: score.reward,
      failureType: score.failureType,
      kind: ending === 'invalid' || ending === 'resource_limit' || ending === 'refused' ? 'error' : 'ok',
    };
  }

  /** The scored episode, once it is over (null before). */
  result(): DbBenchEpisodeResult | null {
    return this.finished;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.sandbox.drop();
  }
}

function observationKind(result: StatementResult): ObservationKind {
  if (result.outcome === 'error') return 'error';
  return result.outcome === 'empty' ? 'empty' : 'ok';
}

export interface DbBenchEpisodeHandle extends Episode {
  readonly sandboxName: string;
  step(action: string, options?: { byHarness?: boolean }): Promise<DbBenchStepOutcome>;
  result(): DbBenchEpisodeResult | null;
}

export class DbBenchEnvironment implements Environment {
  readonly id = 'dbbench';
  readonly host: SandboxHost;
  private readonly ownsHost: boolean;
  private readonly tasks: DbBenchTask[];
  private readonly byId: Map<string, DbBenchTask>;
  private readonly matching: AnswerMatching;
  private readonly pool: Harness[];
  private swept: Promise<void> | undefined;

  constructor(options: DbBenchEnvironmentOptions) {
    if (options.tasks) this.tasks = options.tasks;
    else if (options.dataFile) this.tasks = loadDbBenchTasks(options.dataFile);
    else throw new Error('DbBenchEnvironment needs a task file (dataFile) or tasks');
    this.byId = new Map(this.tasks.map((t) => [t.taskId, t]));
    this.matching = options.scoring ?? 'exact';
    this.pool = options.harnesses ?? [];
    this.ownsHost = !options.host;
    this.host = options.host ?? new SandboxHost({ ...options.sandbox, adminUrl: options.adminUrl });
  }

  listTasks(): TaskRef[] {
    return this.tasks.map(({ taskId, kind }) => ({ taskId, kind }));
  }

  describeTask(taskId: string): string {
    return agentBenchTaskPrompt(this.task(taskId).entry);
  }

  /** The task as loaded (its AgentBench entry, type and line). */
  task(taskId: string): DbBenchTask {
    const task = this.byId.get(taskId);
    if (!task) throw new Error(`DBBench has no task '${taskId}' (tasks are dbbench-000 .. ${this.tasks[this.tasks.length - 1]?.taskId})`);
    return task;
  }

  harnesses(): Harness[] {
    return this.pool;
  }

  async startEpisode(taskId: string, options: { maxTurns: number }): Promise<DbBenchEpisodeHandle> {
    const task = this.task(taskId);
    if (!Number.isInteger(options.maxTurns) || options.maxTurns < 1) {
      throw new Error(`maxTurns must be a positive integer, got ${options.maxTurns}`);
    }
    // Leftovers of workers that died (sandboxes no live host owns, however young) are removed once per process, before its first episode.
    this.swept ??= this.host.sweep({ olderThanMs: 0 }).then(() => undefined);
    await this.swept;
    const sandbox = await this.host.open(task.entry.table);
    return new DbBenchEpisode({ taskId, kind: task.kind }, task, sandbox, options.maxTurns, this.matching);
  }

  /** Closes the admin pool when the env made it. */
  async close(): Promise<void> {
    if (this.ownsHost) await this.host.close();
  }
}
