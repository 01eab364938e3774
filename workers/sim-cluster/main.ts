/**
 * Process entry of the SIMULATED cluster:
 *   tsx workers/sim-cluster/main.ts --port 8765 --data-dir .data/sim-cluster [--world FILE]
 *     [--latency PROFILE [--speedup X] [--latency-file FILE]]
 * Logs (pino) go to stderr; once listening, one JSON line
 * `{"simulated":true,"url":"http://127.0.0.1:PORT"}` goes to stdout.
 */
import { Command, InvalidArgumentError } from 'commander';
import pino from 'pino';
import { DEFAULT_WORLD_PATH, SimWorldError, loadSimWorld } from '../../core/envs/sim/world';
import { LatencyProfileError, LatencyModel } from './latency';
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
}

function parsePort(value: string): number {
  const port = Number(value);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new InvalidArgumentError('expected an integer from 0 to 65535');
  return port;
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
    .parse(argv)
    .opts<CliOptions>();

  const logger = pino({ level: options.logLevel, base: { simulated: true, pid: process.pid } }, pino.destination(2));
  if (options.latency === undefined && (options.speedup !== undefined || options.latencyFile !== undefined)) {
    process.stderr.write('[SIMULATED] --speedup and --latency-file need --latency <profile>\n');
    process.exit(2);
  }
  const latency = options.latency === undefined ? undefined : { profile: options.latency, speedup: options.speedup, file: options.latencyFile };
  let world;
  try {
    world = loadSimWorld(options.world);
    if (latency) LatencyModel.fromOptions(latency); // a bad profile is a usage error, before anything starts
  } catch (err) {
    if (!(err instanceof SimWorldError || err instanceof LatencyProfileError)) throw err;
    process.stderr.write(`${err.message}\n`);
    process.exit(2);
  }

  const cluster = await startSimCluster({ world, dataDir: options.dataDir, host: options.host, port: options.port, logger, latency });
  process.stdout.write(`${JSON.stringify({ simulated: true, url: cluster.url })}\n`);

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
