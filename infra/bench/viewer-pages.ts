/**
 * How fast the trajectory viewer's pages open on a large run store: seeds a
 * run with `rows` rollouts (1,000 per step: 100 tasks x 8 base rollouts, 25
 * dead groups rescued with 8 more) beside a small run of 3 steps, serves the
 * viewer over that database, and times each page (median of `repeats` GETs).
 * The rows are made in SQL (generate_series, core/store/synthetic-runs.ts),
 * not by training: a store's size, not a run's learning, is what is measured.
 *
 *   npx tsx infra/bench/viewer-pages.ts [--rows 1000000] [--repeats 5] [--database URL] [--json]
 */
import { Command, InvalidArgumentError } from 'commander';
import { migrate } from '../../core/store/run-store';
import { ROLLOUTS_PER_STEP, seedSyntheticRuns } from '../../core/store/synthetic-runs';
import { serveRunStore } from '../../viewer/server';

export const BIG_RUN = 'viewer-bench-big';
export const SMALL_RUN = 'viewer-bench-small';

export interface PageTiming {
  page: string;
  run: string;
  address: string;
  /** Milliseconds, median and slowest of the repeats. */
  medianMs: number;
  maxMs: number;
  bytes: number;
}

async function timePage(url: string, repeats: number): Promise<{ medianMs: number; maxMs: number; bytes: number }> {
  const times: number[] = [];
  let bytes = 0;
  for (let i = 0; i < repeats; i++) {
    const started = performance.now();
    const response = await fetch(url);
    const body = await response.text();
    if (response.status !== 200) throw new Error(`${url}: HTTP ${response.status}: ${body.slice(0, 300)}`);
    times.push(performance.now() - started);
    bytes = body.length;
  }
  times.sort((a, b) => a - b);
  return { medianMs: times[Math.floor(times.length / 2)], maxMs: times[times.length - 1], bytes };
}

/** The pages timed on each run: [name, address]. */
function pagesOf(runId: string, steps: number): Array<[string, string]> {
  const run = `/runs/${runId}`;
  const mid = Math.floor(steps / 2);
  const deep = Buffer.from(JSON.stringify(['train', Math.floor(steps * 0.9), 'task-00050-0', 'base', 0])).toString('base64url');
  return [
    ['run (steps, page 1)', run],
    ['run (steps, last page)', `${run}?page=${Math.max(1, Math.ceil(steps / 100))}`],
    ['step (groups, page 1)', `${run}/steps/${mid}`],
    ['step, filtered (rescued, by sibling)', `${run}/steps/${mid}?state=rescued&harness=sibling-1&outcome=success`],
    ['trajectory', `${run}/trajectories/train/${mid}/task-00003-${mid % 7}/base/0`],
    ['task side by side', `${run}/tasks/task-00003-${mid % 7}`],
    ['rollouts, first page', `${run}/rollouts`],
    ['rollouts, deep page (keyset, 90% in)', `${run}/rollouts?after=${deep}`],
    ['rollouts, task id prefix', `${run}/rollouts?task=task-00042`],
    ['rollouts, filtered (rescue successes of a kind)', `${run}/rollouts?role=rescue&outcome=success&kind=kind-2`],
    // The worst case: no index serves the filter and nothing matches, so the whole run is read.
    ['rollouts, a filter nothing matches', `${run}/rollouts?failure=policy_error`],
  ];
}

export async function benchViewerPages(options: {
  databaseUrl: string;
  rows: number;
  repeats: number;
  log: (line: string) => void;
}): Promise<PageTiming[]> {
  const bigSteps = Math.max(1, Math.round(options.rows / ROLLOUTS_PER_STEP));
  await migrate(options.databaseUrl);
  await seedSyntheticRuns(
    options.databaseUrl,
    [
      [SMALL_RUN, 3],
      [BIG_RUN, bigSteps],
    ],
    options.log,
  );
  // No Temporal here: the status column reads 'unknown' after one failed connect, as when Temporal is down.
  const viewer = await serveRunStore({
    databaseUrl: options.databaseUrl,
    temporalAddress: '127.0.0.1:1',
    namespace: 'default',
    host: '127.0.0.1',
    port: 0,
  });
  const timings: PageTiming[] = [];
  try {
    const runs = await timePage(`${viewer.url}/runs`, options.repeats);
    timings.push({ page: 'runs', run: '-', address: '/runs', ...runs });
    for (const [runId, steps] of [
      [SMALL_RUN, 3],
      [BIG_RUN, bigSteps],
    ] as const) {
      for (const [page, address] of pagesOf(runId, steps)) {
        timings.push({
          page,
          run: `${runId} (${steps * ROLLOUTS_PER_STEP} rollouts)`,
          address,
          ...(await timePage(`${viewer.url}${address}`, options.repeats)),
        });
      }
    }
  } finally {
    await viewer.close();
  }
  return timings;
}

function positive(name: string) {
  return (text: string) => {
    const n = Number(text);
    if (!Number.isInteger(n) || n < 1) throw new InvalidArgumentError(`${name} takes a positive whole number`);
    return n;
  };
}

if (require.main === module) {
  const program = new Command('viewer-pages')
    .option('--rows <n>', 'rollouts of the large run', positive('--rows'), 1_000_000)
    .option('--repeats <n>', 'GETs per page (the median is reported)', positive('--repeats'), 5)
    .option('--database <url>', 'the run store to seed and read', 'postgresql://postgres@127.0.0.1:5432/harness_s_viewer_bench')
    .option('--json', 'print the timings as JSON')
    .parse();
  const opts = program.opts<{ rows: number; repeats: number; database: string; json?: boolean }>();
  benchViewerPages({
    databaseUrl: opts.database,
    rows: opts.rows,
    repeats: opts.repeats,
    log: (line) => process.stderr.write(`${line}\n`),
  }).then(
    (timings) => {
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(timings, null, 2)}\n`);
        return;
      }
      for (const t of timings) {
        process.stdout.write(
          `${t.medianMs.toFixed(1).padStart(8)} ms median ${t.maxMs.toFixed(1).padStart(8)} ms max ${String(t.bytes).padStart(8)} B  ${t.run.padEnd(40)} ${t.page}\n`,
        );
      }
    },
    (err: Error) => {
      process.stderr.write(`viewer-pages: ${err.message}\n`);
      process.exit(1);
    },
  );
}
