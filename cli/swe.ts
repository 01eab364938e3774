/**
 * `harness-s swe`: set up the shipped SWE instances on this machine (trees
 * rebuilt from PyPI), build new ones from release pairs, validate and replay.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/temporal-cli';
import { buildInstance, loadSweData, replaySwe, setupInstanceSet, validateInstance, type Log } from '../core/envs/swe/build';
import { parseInstanceSet, readText, SweDataError } from '../core/envs/swe/instances';
import { checkSandbox } from '../core/envs/swe/sandbox';
import { evaluatePatch } from '../core/envs/swe/scoring';
import { Workspace } from '../core/envs/swe/workspace';

/** The instance set the project ships (metadata only; `swe setup` builds the trees). */
export const SHIPPED_SWE_SET = path.join(PROJECT_ROOT, 'data', 'swe', 'instances.json');

export function sweSetup(file: string, log: Log): string {
  checkSandbox();
  return setupInstanceSet(file, log);
}

export interface BuildOptions {
  package: string;
  from: string;
  to: string;
  statement: string;
  license: string;
  pythonpath: string[];
  pytestArgs: string[];
  testFiles?: string[];
  id?: string;
  into: string;
}

/** Builds one instance and adds it to the set file `into` (refused, with the reason, when it does not validate). */
export async function sweBuild(options: BuildOptions, log: Log): Promise<string> {
  checkSandbox();
  const set = parseInstanceSet(readText(options.into), options.into);
  const id = options.id ?? `${options.package}-${options.to}`;
  if (set.instances.some((i) => i.instance_id === id)) throw new SweDataError(`${options.into} already has an instance ${id}`);
  const instance = await buildInstance(
    {
      instance_id: id,
      package: options.package,
      before: options.from,
      after: options.to,
      pythonpath: options.pythonpath,
      pytest_args: options.pytestArgs,
      test_files: options.testFiles,
      license: options.license,
      problem_statement: options.statement,
    },
    set,
    log,
  );
  set.instances.push(instance);
  writeFileSync(options.into, `${JSON.stringify(set, null, 2)}\n`);
  return instance.instance_id;
}

/** Validates every instance of a data file: gold three times, none once. */
export async function sweValidate(
  file: string,
  log: Log,
): Promise<{ total: number; valid: number; refused: Array<{ instanceId: string; reason: string }> }> {
  checkSandbox();
  const instances = loadSweData(file);
  const refused: Array<{ instanceId: string; reason: string }> = [];
  for (const instance of instances) {
    const v = await validateInstance(instance);
    log(`swe validate: ${instance.instance_id}: ${v.ok ? 'valid' : v.reason}`);
    if (!v.ok) refused.push({ instanceId: instance.instance_id, reason: v.reason ?? '' });
  }
  return { total: instances.length, valid: instances.length - refused.length, refused };
}

export async function sweReplay(file: string, concurrency: number, log: Log) {
  checkSandbox();
  return replaySwe(loadSweData(file), concurrency, log);
}

export interface SweBench {
  instances: number;
  /** One `true` in the sandbox, end to end (bubblewrap, prlimit, bash), in ms. */
  command: { runs: number; meanMs: number; p50Ms: number; p95Ms: number };
  /** A fresh workspace (a copy of the tree, given to the sandbox user) and its removal, in ms. */
  workspace: { meanMs: number; maxMs: number };
  /** Scoring the gold patch (fresh tree, both patches, the tests), in seconds. */
  scoring: { meanSeconds: number; maxSeconds: number; maxInstance: string };
}

const percentile = (sorted: number[], q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];

/** What an episode's pieces cost on this machine: a sandboxed command, a workspace, a scoring. */
export async function sweBench(file: string, commands: number, log: Log): Promise<SweBench> {
  checkSandbox();
  const instances = loadSweData(file);
  const workspaces: number[] = [];
  const scorings: Array<{ id: string; seconds: number }> = [];
  const timings: number[] = [];
  for (const [i, instance] of instances.entries()) {
    let started = Date.now();
    const workspace = Workspace.create(instance, 'bench');
    try {
      if (i === 0) {
        for (let n = 0; n < commands; n++) {
          const t = process.hrtime.bigint();
          await workspace.exec('true');
          timings.push(Number(process.hrtime.bigint() - t) / 1e6);
        }
      }
    } finally {
      workspace.close();
    }
    workspaces.push(Date.now() - started);
    started = Date.now();
    await evaluatePatch(instance, instance.patch);
    scorings.push({ id: instance.instance_id, seconds: (Date.now() - started) / 1000 });
    log(`swe bench: ${instance.instance_id}: workspace ${workspaces.at(-1)} ms, scoring ${scorings.at(-1)!.seconds.toFixed(2)} s`);
  }
  const sorted = [...timings].sort((a, b) => a - b);
  const slowest = scorings.reduce((a, b) => (b.seconds > a.seconds ? b : a));
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  return {
    instances: instances.length,
    command: { runs: timings.length, meanMs: mean(timings), p50Ms: percentile(sorted, 0.5), p95Ms: percentile(sorted, 0.95) },
    workspace: { meanMs: mean(workspaces), maxMs: Math.max(...workspaces) },
    scoring: { meanSeconds: mean(scorings.map((s) => s.seconds)), maxSeconds: slowest.seconds, maxInstance: slowest.id },
  };
}
