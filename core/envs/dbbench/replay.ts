/**
 * Replays a DBBench task file with a scripted gold agent through the real
 * environment (sandbox set up and dropped per episode, the same step(text)
 * path a policy's replies take): a check that the server, the sandbox and
 * the scoring reproduce AgentBench's answers, and a throughput measure.
 */
import { mapWithConcurrency } from '../../concurrency';
import { agentBenchTurnBudget } from './agentbench-protocol';
import { DbBenchEnvironment } from './environment';
import { pyRepr } from './python-values';
import { SandboxHost, type SandboxHostOptions } from './sandbox';
import { labelToPy, type AnswerMatching } from './scoring';
import { isDmlType, loadDbBenchTasks, type DbBenchTask } from './tasks';
import type { FailureType } from '../../policy/trajectory';

/**
 * The gold agent's replies: for DML the label's SQL as an operation, then an
 * empty final answer (AgentBench scores DML by the table; "your answer field
 * can be anything"); for queries the label as the final answer.
 */
export function goldAgentReplies(task: DbBenchTask): string[] {
  const { label } = task.entry;
  if (isDmlType(task.type)) {
    return [`Action: Operation\n\`\`\`sql\n${String(label[0])}\n\`\`\``, 'Action: Answer\nFinal Answer: []'];
  }
  return [`Action: Answer\nFinal Answer: ${pyRepr({ type: 'list', items: label.map(labelToPy) })}`];
}

export interface ReplayOptions {
  file: string;
  concurrency: number;
  adminUrl?: string;
  sandbox?: Omit<SandboxHostOptions, 'adminUrl'>;
  scoring?: AnswerMatching;
  /** Only the first `limit` tasks. */
  limit?: number;
}

export interface ReplayFailure {
  taskId: string;
  type: string;
  failureType: FailureType | null;
  answer: string;
}

export interface ReplayReport {
  total: number;
  passed: number;
  byType: Record<string, { total: number; passed: number }>;
  failures: ReplayFailure[];
  episodesPerSecond: number;
}

export async function replayDbBench(options: ReplayOptions): Promise<ReplayReport> {
  const tasks = loadDbBenchTasks(options.file).slice(0, options.limit);
  const host = new SandboxHost({ ...options.sandbox, adminUrl: options.adminUrl });
  const env = new DbBenchEnvironment({ tasks, host, scoring: options.scoring });
  const report: ReplayReport = { total: 0, passed: 0, byType: {}, failures: [], episodesPerSecond: 0 };
  const started = process.hrtime.bigint();
  const replayTask = async (task: DbBenchTask) => {
    const episode = await env.startEpisode(task.taskId, { maxTurns: agentBenchTurnBudget() });
    try {
      for (const reply of goldAgentReplies(task)) {
        const outcome = await episode.step(reply);
        if (outcome.done) break;
      }
    } finally {
      await episode.close();
    }
    const result = episode.result();
    const cell = (report.byType[task.type] ??= { total: 0, passed: 0 });
    cell.total += 1;
    report.total += 1;
    if (result?.correct) {
      cell.passed += 1;
      report.passed += 1;
    } else {
      report.failures.push({
        taskId: task.taskId,
        type: task.type,
        failureType: result?.failureType ?? null,
        answer: result?.answer ?? '',
      });
    }
  };
  try {
    // A concurrency below 1 still replays, one episode at a time.
    await mapWithConcurrency(tasks, Math.max(1, options.concurrency), replayTask);
  } finally {
    await host.close();
  }
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  report.episodesPerSecond = seconds > 0 ? report.total / seconds : 0;
  return report;
}
