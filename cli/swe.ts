/**
 * `harness-s swe`: set up the shipped SWE instances on this machine (trees
 * rebuilt from PyPI), build new ones from release pairs, validate and replay.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { PROJECT_ROOT } from '../infra/temporal-cli';
import { buildInstance, loadSweData, replaySwe, setupInstanceSet, validateInstance, type Log } from '../core/envs/swe/build';
import { parseInstanceSet, SweDataError } from '../core/envs/swe/instances';
import { checkSandbox } from '../core/envs/swe/sandbox';

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
  const text = readFileSync(options.into, 'utf8');
  const set = parseInstanceSet(text, options.into);
  const instance = await buildInstance(
    {
      instance_id: options.id, package: options.package, before: options.from, after: options.to,
      pythonpath: options.pythonpath, pytest_args: options.pytestArgs, test_files: options.testFiles,
      license: options.license, problem_statement: options.statement,
    },
    set,
    log,
  );
  if (set.instances.some((i) => i.instance_id === instance.instance_id)) throw new SweDataError(`${options.into} already has an instance ${instance.instance_id}`);
  set.instances.push(instance);
  writeFileSync(options.into, `${JSON.stringify(set, null, 2)}\n`);
  return instance.instance_id;
}

/** Validates every instance of a data file: gold three times, none once. */
export async function sweValidate(file: string, log: Log): Promise<{ total: number; valid: number; refused: Array<{ instanceId: string; reason: string }> }> {
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
