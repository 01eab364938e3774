/**
 * The layer order is kept by lint (eslint/layers.mjs, eslint/layer-order.mjs):
 * files that import up the layers are planted in the tree, and the project's
 * own `eslint` refuses each of them, while a file importing down passes.
 */
import { execFile } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const ROOT = path.resolve(__dirname, '../..');
const run = promisify(execFile);

interface LintResult {
  filePath: string;
  messages: { ruleId: string | null; message: string }[];
}

const planted = {
  // The harness is below the store: the domain never reads the database.
  'core/harness/planted-upward.ts': "import type { RunStore } from '../store/run-store';\nexport type Planted = RunStore;\n",
  // Activities never import workflow code.
  'activities/planted-upward.ts': "import type { RunStatus } from '../workflows/definitions';\nexport type Planted = RunStatus;\n",
  // Nothing imports cli/.
  'infra/planted-upward.ts': "import { print } from '../cli/commands/shared';\nexport const planted = print;\n",
  // A folder no layer names is refused until it is placed.
  'core/planted-folder/planted.ts': 'export const planted = 1;\n',
  // Down the layers: allowed.
  'core/store/planted-downward.ts': "import type { Harness } from '../harness/harness';\nexport type Planted = Harness;\n",
};

afterAll(() => {
  for (const file of Object.keys(planted)) rmSync(path.join(ROOT, file), { force: true });
  rmSync(path.join(ROOT, 'core/planted-folder'), { recursive: true, force: true });
});

test('lint refuses an import that runs up the layers, and a file in no layer; an import down passes', async () => {
  for (const [file, text] of Object.entries(planted)) {
    const full = path.join(ROOT, file);
    mkdirSync(path.dirname(full), { recursive: true });
    writeFileSync(full, text);
  }
  const lint = await run(
    process.execPath,
    [path.join(ROOT, 'node_modules/eslint/bin/eslint.js'), '--format', 'json', ...Object.keys(planted)],
    { cwd: ROOT, maxBuffer: 1 << 24 },
  ).then(
    (r) => ({ code: 0, stdout: r.stdout }),
    (e: { code: number; stdout: string }) => ({ code: e.code, stdout: e.stdout }),
  );
  expect(lint.code).toBe(1);
  const results = JSON.parse(lint.stdout) as LintResult[];
  const layerMessages = (file: string) =>
    results
      .find((r) => r.filePath === path.join(ROOT, file))!
      .messages.filter((m) => m.ruleId === 'house/layer-order')
      .map((m) => m.message);
  expect(layerMessages('core/harness/planted-upward.ts')).toEqual([
    expect.stringContaining("'../store/run-store' is in layer core-store, above this file's layer core-harness"),
  ]);
  expect(layerMessages('activities/planted-upward.ts')).toEqual([
    expect.stringContaining("'../workflows/definitions' is in layer workflows, above this file's layer activities"),
  ]);
  expect(layerMessages('infra/planted-upward.ts')).toEqual([
    expect.stringContaining("'../cli/commands/shared' is in layer cli, above this file's layer infra"),
  ]);
  expect(layerMessages('core/planted-folder/planted.ts')).toEqual([expect.stringContaining('in no layer of eslint/layers.mjs')]);
  expect(results.find((r) => r.filePath === path.join(ROOT, 'core/store/planted-downward.ts'))!.messages).toEqual([]);
}, 120_000);
