/**
 * Where AppWorld is on this machine, and the fixture world's definition.
 *
 * `harness-s appworld setup` (infra/appworld/install.ts) installs the
 * `appworld` package (Apache-2.0, https://github.com/StonyBrookNLP/appworld)
 * into a Python 3.11 venv and builds the fixture world (an APPWORLD_ROOT)
 * from fixture/fixture-tasks.json with fixture/build_fixture_world.py, which
 * uses the package's own code. Everything goes to a cache outside the clone,
 * keyed by version: $HARNESS_S_APPWORLD_HOME, default ~/.cache/harness-s/appworld.
 *
 *   appworld-<version>-py3.11/   the venv (pip install appworld==<version>, then `appworld install`)
 *   cache/                       APPWORLD_CACHE: what `appworld install` unpacks outside the venv
 *   fixture-<hash>/              the fixture APPWORLD_ROOT; the hash covers the task file, the
 *                                evaluation files it names, the builder and the package version
 *   logs/                        install and build logs
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { z } from 'zod';
import { UserError } from '../../errors';
import { formatZodError } from '../../zod-errors';

/** Written last into a complete venv or fixture folder (the engines' marker). */
export const COMPLETE_MARKER = '.harness-s-complete';

export const APPWORLD_VERSION = '0.1.3.post1';
export const APPWORLD_PYTHON = '3.11';

export const FIXTURE_DIR = path.join(__dirname, 'fixture');
/** The fixture world's definition: supervisor, accounts, tasks with their solutions. */
export const FIXTURE_TASKS_FILE = path.join(FIXTURE_DIR, 'fixture-tasks.json');
/** Builds a fixture APPWORLD_ROOT from FIXTURE_TASKS_FILE; writes COMPLETE_MARKER last. */
export const FIXTURE_BUILDER = path.join(FIXTURE_DIR, 'build_fixture_world.py');
/** The dataset file the builder writes: <root>/data/datasets/fixture.txt, every task id. */
export const FIXTURE_DATASET = 'fixture';

/** A failed setup step: the command, its exit code and the end of its output. */
export class AppWorldFixtureError extends UserError {
  override name = 'AppWorldFixtureError';
}

export interface AppWorldInstall {
  /** The venv's Python. */
  python: string;
  /** The venv's `appworld` CLI (`appworld serve environment --port N --root <fixtureRoot> --no-show-usage`). */
  appworld: string;
  /** APPWORLD_CACHE: set it for every `appworld` command, or the package falls back to ~/.appworld. */
  cache: string;
  /** The built fixture APPWORLD_ROOT (holds data/). */
  fixtureRoot: string;
}

export function appworldHome(): string {
  return path.resolve(process.env.HARNESS_S_APPWORLD_HOME || path.join(os.homedir(), '.cache', 'harness-s', 'appworld'));
}

export const venvDir = (home = appworldHome()) => path.join(home, `appworld-${APPWORLD_VERSION}-py${APPWORLD_PYTHON}`);
export const cacheDir = (home = appworldHome()) => path.join(home, 'cache');
export const fixtureDir = (home = appworldHome()) => path.join(home, fixtureKey());

/** `fixture-<hash>`: a changed task file, evaluation file, builder or package version builds a new world. */
export function fixtureKey(): string {
  const hash = createHash('sha256').update(`appworld==${APPWORLD_VERSION}\n`);
  const inputs = [
    FIXTURE_TASKS_FILE,
    FIXTURE_BUILDER,
    ...[...new Set(loadFixtureTasks().map((t) => t.evaluation))].sort().map((f) => path.join(FIXTURE_DIR, f)),
  ];
  for (const file of inputs) hash.update(`${path.relative(FIXTURE_DIR, file)}\n`).update(readFileSync(file));
  return `fixture-${hash.digest('hex').slice(0, 10)}`;
}

export function installAt(home: string): AppWorldInstall {
  const venv = venvDir(home);
  return {
    python: path.join(venv, 'bin', 'python'),
    appworld: path.join(venv, 'bin', 'appworld'),
    cache: cacheDir(home),
    fixtureRoot: fixtureDir(home),
  };
}

/** What is installed, without installing anything: null unless both the venv and the fixture world are complete. */
export function appWorldInstall(home = appworldHome()): AppWorldInstall | null {
  if (!existsSync(path.join(venvDir(home), COMPLETE_MARKER))) return null;
  if (!existsSync(path.join(fixtureDir(home), COMPLETE_MARKER))) return null;
  return installAt(home);
}

// --- the fixture world's definition ---------------------------------------------------------

const SeedGroup = z
  .object({
    /** `<app>.<Model>`, e.g. simple_note.Note. */
    model: z.string().regex(/^[a-z_]+\.[A-Za-z]+$/, 'is not <app>.<Model>'),
    /** Field values; `{"$id": model, ...match}` stands for the id of the one row matching; ISO text for datetimes. */
    rows: z.array(z.record(z.string(), z.unknown())),
  })
  .strict();

export const FixtureTask = z
  .object({
    /** `<scenario>_<n>`: the package splits ids on their one underscore; scenarios are letters only. */
    id: z.string().regex(/^[A-Za-z]+_[0-9]+$/, 'is not <letters>_<number>'),
    instruction: z.string().min(1),
    difficulty: z.number().int().min(1).max(3),
    /** The ground-truth answer; null for tasks that ask for none. */
    answer: z.union([z.string(), z.number(), z.boolean(), z.null()]),
    /** The evaluation code, relative to core/envs/appworld/fixture/. */
    evaluation: z.string().regex(/^fixture-tasks\/[A-Za-z0-9_]+\.py$/, 'is not fixture-tasks/<name>.py'),
    private_data: z.record(z.string(), z.unknown()),
    public_data: z.record(z.string(), z.unknown()).optional(),
    seed: z.array(SeedGroup),
    /** A known-good solution: the code an agent sends to /execute, in order; the last step completes the task. */
    solution: z.array(z.string().min(1)).min(1),
  })
  .strict();
export type FixtureTask = z.infer<typeof FixtureTask>;

export const FixtureWorld = z
  .object({
    license: z.string().min(1),
    description: z.string(),
    /** The world's clock during every task (ISO, no zone). */
    datetime: z.string().regex(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$/, 'is not YYYY-MM-DDTHH:MM:SS'),
    supervisor: z
      .object({
        first_name: z.string().min(1),
        last_name: z.string().min(1),
        email: z.email(),
        phone_number: z.string().min(1),
        birthday: z.string().regex(/^\d{4}-\d{2}-\d{2}$/),
        sex: z.enum(['female', 'male']),
      })
      .strict(),
    /** The supervisor's accounts: app name -> its password (Simple Note and Todoist here). */
    accounts: z.record(z.string(), z.object({ password: z.string().min(5) }).strict()),
    tasks: z.array(FixtureTask).min(1),
  })
  .strict();
export type FixtureWorld = z.infer<typeof FixtureWorld>;

/** The parsed fixture-tasks.json, checked (schema, unique ids, evaluation files present). */
export function loadFixtureWorld(file = FIXTURE_TASKS_FILE): FixtureWorld {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (err) {
    throw new AppWorldFixtureError(`cannot read the AppWorld fixture world ${file}: ${(err as Error).message}`);
  }
  const parsed = FixtureWorld.safeParse(raw);
  if (!parsed.success)
    throw new AppWorldFixtureError(`${file} is not a valid AppWorld fixture world:\n${formatZodError(parsed.error, FixtureWorld)}`);
  const ids = new Set<string>();
  for (const task of parsed.data.tasks) {
    if (ids.has(task.id)) throw new AppWorldFixtureError(`${file}: task id '${task.id}' appears twice`);
    ids.add(task.id);
    if (!existsSync(path.join(path.dirname(file), task.evaluation))) {
      throw new AppWorldFixtureError(
        `${file}: task ${task.id}: its evaluation file ${path.join(path.dirname(file), task.evaluation)} does not exist`,
      );
    }
  }
  return parsed.data;
}

/** The fixture world's tasks: id, instruction, answer, solution code, ... */
export function loadFixtureTasks(file = FIXTURE_TASKS_FILE): FixtureTask[] {
  return loadFixtureWorld(file).tasks;
}

/** A task id's scenario (the part before its underscore), as AppWorld groups tasks for scenario goal completion. */
export const fixtureScenario = (taskId: string): string => taskId.split('_')[0];
