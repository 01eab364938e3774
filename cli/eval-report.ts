/** The table `harness-s eval` ends with: AgentBench's per-type table for DBBench, AppWorld's completion figures, success per kind elsewhere. */
import type { Environment } from '../core/harness/environment';
import { DbBenchEnvironment } from '../core/envs/dbbench/environment';
import { agentBenchReport, type TypeAccuracy } from '../core/envs/dbbench/scoring';
import type { EvalResult } from './eval';
import { AppWorldEnvironment, appWorldCompletion } from '../core/envs/appworld/environment';

export interface EvalTable {
  byType: TypeAccuracy[];
  metrics: Record<string, number>;
}

export function evalTable(env: Environment, result: EvalResult): EvalTable {
  if (env instanceof DbBenchEnvironment) {
    return agentBenchReport(result.trajectories.map((t) => ({ type: env.task(t.taskId).type, correct: t.success })));
  }
  const byType = Object.entries(result.byKind).map(([type, c]) => ({
    type,
    total: c.total,
    passed: c.passed,
    accuracy: c.total ? c.passed / c.total : 0,
  }));
  if (env instanceof AppWorldEnvironment) {
    // AppWorld's own figures (percent): task goal completion, and scenario goal completion (every task of a scenario).
    const completion = appWorldCompletion(result.trajectories);
    return {
      byType,
      metrics: { task_goal_completion: completion.taskGoalCompletion, scenario_goal_completion: completion.scenarioGoalCompletion },
    };
  }
  return { byType, metrics: { overall_accuracy: result.total ? result.passed / result.total : 0 } };
}

const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

export function evalTableText(result: EvalResult, table: EvalTable): string {
  const lines = [
    `eval ${result.evalId}: harness ${result.harness}, model ${result.model}: ${result.passed}/${result.total} passed, ` +
      `${pct(result.total ? result.passed / result.total : 0)} (95% CI ${pct(result.interval95.lo)}-${pct(result.interval95.hi)}; stored in PostgreSQL as run ${result.evalId})`,
    `${'type'.padEnd(20)}${'passed'.padStart(8)}${'total'.padStart(8)}${'accuracy'.padStart(10)}`,
    ...table.byType.map(
      (row) =>
        `${row.type.padEnd(20)}${String(row.passed).padStart(8)}${String(row.total).padStart(8)}${`${(row.accuracy * 100).toFixed(1)}%`.padStart(10)}`,
    ),
    ...Object.entries(table.metrics).map(([name, value]) => `${name}: ${value.toFixed(4)}`),
    `failures: ${
      Object.entries(result.failures)
        .map(([type, n]) => `${type} ${n}`)
        .join(', ') || 'none'
    }`,
  ];
  return lines.join('\n');
}
