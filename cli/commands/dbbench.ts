/** `harness-s` dbbench ...: AgentBench DBBench. */
import type { Command } from 'commander';
import { replayDbBench } from '../../core/envs/dbbench/replay';
import { print, action, positiveInt, examplesText } from './shared';
import { processSettings } from '../../core/settings';

export function registerDbBenchCommands(program: Command): void {
  const dbbench = program
    .command('dbbench')
    .description('AgentBench DBBench on a MySQL-compatible server')
    .addHelpText('after', examplesText('dbbench replay --data data/dbbench/dev.jsonl'));
  dbbench
    .command('replay')
    .description('every task through the real runtime and scoring with a scripted gold agent; accuracy per type')
    .requiredOption('--data <file>', 'AgentBench DBBench JSONL')
    .option('--concurrency <n>', 'episodes at once', positiveInt('--concurrency'), 4)
    .option('--mysql-url <url>', 'admin connection (default $DBBENCH_MYSQL_URL or the local server)')
    .option('--json', 'print {"total":N,"passed":N,"byType":{...}}')
    .addHelpText(
      'after',
      examplesText('dbbench replay --data data/dbbench/dev.jsonl', 'dbbench replay --data data/dbbench/dev.jsonl --concurrency 8 --json'),
    )
    .action(
      action(async (opts: { data: string; concurrency: number; mysqlUrl?: string; json?: boolean }) => {
        const result = await replayDbBench({
          file: opts.data,
          concurrency: opts.concurrency,
          adminUrl: opts.mysqlUrl ?? processSettings().dbBenchMysqlUrl,
        });
        if (opts.json) return print(JSON.stringify({ total: result.total, passed: result.passed, byType: result.byType }));
        print(
          `replay: ${result.passed}/${result.total} passed (${result.episodesPerSecond.toFixed(1)} episodes/s at concurrency ${opts.concurrency})`,
        );
        for (const [type, cell] of Object.entries(result.byType)) print(`  ${type.padEnd(24)} ${cell.passed}/${cell.total}`);
        if (result.passed !== result.total) process.exitCode = 1;
      }),
    );
}
