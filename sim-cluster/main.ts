/**
 * Process entry of the SIMULATED cluster:
 *   tsx sim-cluster/main.ts --port 8765 --data-dir .data/sim-cluster [--world FILE]
 *     [--serve all|inference|trainer] [--keep-adapters] [--session-timeout-seconds S]
 *     [--latency PROFILE [--speedup X] [--latency-file FILE] [--servers N]]
 * Logs (pino) go to stderr; once listening, one JSON line
 * `{"simulated":true,"url":"http://127.0.0.1:PORT","serves":"all"}` goes to stdout.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import pino from 'pino';
import { DEFAULT_WORLD_PATH, SimWorldError, loadSimWorld } from '../core/envs/sim/world';
import { LatencyProfileError } from '../core/latency-profiles';
import { LatencyModel } from './latency';
import { SIM_CLUSTER_PARTS, type SimClusterServes } from './request-counts';
import { startSimCluster } from './server';

interface CliOptions {
  port: number;
  host: string;
  dataDir: string;
  world: string;
  logLevel: string;
  latency?: string;
  speedup?: number;
  latencyFile?: string;
  servers?: number;
  serve: SimClusterServes;
  keepAdapters: boolean;
  sessionTimeoutSeconds?: number;
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('expected an integer from 0 to 65535');
  return port;
}

function parseServers(value: string): number {
  const servers = Number(value);
  if (!Number.isInteger(servers) || servers < 1) throw new InvalidArgumentError('expected an integer >= 1');
  return servers;
}

function parseSeconds(value: string): number {
  const seconds = Number(value);
  if (!Number.isFinite(seconds) || seconds <= 0) throw new InvalidArgumentError('expected a number of seconds > 0');
  return seconds;
}

/** Flags that mean nothing with the other flags given: each is a usage error, named. */
function usageProblems(options: CliOptions): string[] {
  const problems: string[] = [];
  const needLatency = [
    options.speedup !== undefined && '--speedup',
    options.latencyFile !== undefined && '--latency-file',
    options.servers !== undefined && '--servers',
  ].filter((flag): flag is string => flag !== false);
  if (options.latency === undefined && needLatency.length > 0)
    problems.push(`${needLatency.join(', ')} ${needLatency.length === 1 ? 'needs' : 'need'} --latency <profile>`);
  if (options.serve === 'trainer' && options.keepAdapters)
    problems.push('--keep-adapters is for inference; this process serves only the trainer (--serve trainer)');
  if (options.serve === 'trainer' && options.servers !== undefined)
    problems.push('--servers sets inference replicas; this process serves only the trainer (--serve trainer)');
  if (options.serve === 'inference' && options.sessionTimeoutSeconds !== undefined) {
    problems.push('--session-timeout-seconds is for the trainer; this process serves only inference (--serve inference)');
  }
  return problems;
}

function parseSpeedup(value: string): number {
  const speedup = Number(value);
  if (!Number.isFinite(speedup) || speedup < 1) throw new InvalidArgumentError('expected a number >= 1');
  return speedup;
}

async function main(argv: string[]): Promise<void> {
  const options = new Command()
    .name('sim-cluster')
    .description('[SIMULATED] vLLM-compatible inference and Tinker-compatible training over the sim policy')
    .option('--port <port>', 'port to listen on (0 picks a free one)', parsePort, 8765)
    .option('--host <host>', 'address to bind', '127.0.0.1')
    .option('--data-dir <dir>', 'where training state, saved weights and loaded adapters are kept', '.data/sim-cluster')
    .option('--world <file>', 'sim world JSON file', DEFAULT_WORLD_PATH)
    .option('--log-level <level>', 'pino log level', 'info')
    .option('--latency <profile>', 'answer in SIMULATED GPU time from this latency profile (latency-profiles.json); off by default')
    .option('--speedup <x>', 'with --latency: simulated seconds per real second (>= 1)', parseSpeedup)
    .option('--latency-file <file>', 'with --latency: a latency profiles file other than the shipped one')
    .option(
      '--servers <n>',
      "with --latency: inference replicas this process models, replacing the profile's (1 for a process standing for one vLLM server)",
      parseServers,
    )
    .addOption(
      new Option('--serve <part>', 'the APIs to serve: all, inference (/v1, /health: one replica) or trainer (/api/v1)')
        .choices(SIM_CLUSTER_PARTS)
        .default('all'),
    )
    .option(
      '--keep-adapters',
      'load again the LoRA adapters loaded before a restart (vLLM forgets them, and so does the sim by default)',
      false,
    )
    .option(
      '--session-timeout-seconds <s>',
      'a Tinker session silent this long expires and its models are unloaded (default 300, as SkyRL)',
      parseSeconds,
    )
    .parse(argv)
    .opts<CliOptions>();

  const logger = pino({ level: options.logLevel, base: { simulated: true, pid: process.pid } }, pino.destination(2));
  const problems = usageProblems(options);
  if (problems.length > 0) {
    process.stderr.write(problems.map((problem) => `[SIMULATED] ${problem}\n`).join(''));
    process.exit(2);
  }
  const latency =
    options.latency === undefined
      ? undefined
      : { profile: options.latency, speedup: options.speedup, file: options.latencyFile, servers: options.servers };
  let world;
  try {
    world = loadSimWorld(options.world);
    if (latency) LatencyModel.fromOptions(latency); // a bad profile is a usage error, before anything starts
  } catch (err) {
    if (!(err instanceof SimWorldError || err instanceof LatencyProfileError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }

  const cluster = await startSimCluster({
    world,
    dataDir: options.dataDir,
    host: options.host,
    port: options.port,
    logger,
    latency,
    serve: options.serve,
    keepAdapters: options.keepAdapters,
    trainerSessionTimeoutMs: options.sessionTimeoutSeconds === undefined ? undefined : options.sessionTimeoutSeconds * 1000,
  });
  process.stdout.write(`${JSON.stringify({ simulated: true, url: cluster.url, serves: cluster.serves })}\n`);

  let stopping = false;
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, '[SIMULATED] shutting down');
    cluster.close().then(
      () => process.exit(0),
      (err: unknown) => {
        logger.error({ err }, '[SIMULATED] unclean shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

main(process.argv).catch((err: unknown) => {
  process.stderr.write(`[SIMULATED] sim cluster failed to start: ${(err as Error).stack ?? String(err)}\n`);
  process.exit(1);
});
