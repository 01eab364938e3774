/**
 * The JSON Schemas checked in under examples/ (for editors and the Temporal
 * UI) and the config reference docs/config.md are the ones the code gives: a
 * config field added, renamed or documented anew shows up in them once
 * `npm run schema` is run. Every field of both configs has a description.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runConfigFileJsonSchema } from '../../core/config';
import { evolutionConfigFileJsonSchema } from '../../core/evolution/config';
import { configReferenceMarkdown } from '../../infra/config-reference';

const ROOT = path.join(__dirname, '../..');

/** Fails with the file to regenerate and the difference, when the checked-in file is not the generated one. */
function expectCheckedIn(file: string, generated: unknown, read: (text: string) => unknown = JSON.parse): void {
  const checkedIn = read(readFileSync(path.join(ROOT, file), 'utf8'));
  try {
    expect(typeof generated === 'string' ? generated : JSON.parse(JSON.stringify(generated))).toEqual(checkedIn);
  } catch (err) {
    if (err instanceof Error)
      err.message = `${file} differs from what the code gives: run \`npm run schema\` and check in the result.\n\n${err.message}`;
    throw err;
  }
}

test('examples/run-config.schema.json is the schema of a run config file', () => {
  expectCheckedIn('examples/run-config.schema.json', runConfigFileJsonSchema());
});

test('examples/evolution-config.schema.json is the schema of an evolution config file', () => {
  expectCheckedIn('examples/evolution-config.schema.json', evolutionConfigFileJsonSchema());
});

test('docs/config.md is the reference the two schemas give', () => {
  expectCheckedIn('docs/config.md', configReferenceMarkdown(runConfigFileJsonSchema(), evolutionConfigFileJsonSchema()), (text) => text);
});

/** The path of every node of a JSON Schema that has a type but no description (defaults are values, not schemas). */
function undescribed(node: unknown, at = ''): string[] {
  if (Array.isArray(node)) return node.flatMap((child, i) => undescribed(child, `${at}[${i}]`));
  if (node === null || typeof node !== 'object') return [];
  const own = 'type' in node && !('description' in node) ? [at || '(root)'] : [];
  return [
    ...own,
    ...Object.entries(node).flatMap(([key, child]) => (key === 'default' || key === 'const' ? [] : undescribed(child, `${at}/${key}`))),
  ];
}

test.each([
  ['run', runConfigFileJsonSchema],
  ['evolution', evolutionConfigFileJsonSchema],
])('every field of the %s config file schema is described, the {"config": ...} wrapper too', (_kind, schemaOf) => {
  const schema = schemaOf() as { properties: Record<string, { properties?: object }>; required: string[]; additionalProperties: boolean };
  expect(undescribed(schema)).toEqual([]);
  expect(Object.keys(schema.properties)).toEqual(['$schema', 'config']);
  expect(schema.required).toEqual(['config']);
  expect(schema.additionalProperties).toBe(false);
});

test('the run config reference names every field with its type and default, and says which are SIMULATED', () => {
  const reference = readFileSync(path.join(ROOT, 'docs/config.md'), 'utf8');
  expect(reference).toContain('| `rollout.groupSize` | integer, ≥ 2 | `8` | G: rollouts per task group');
  expect(reference).toContain('| `router.voters[].baseUrl` | URL | required |');
  expect(reference).toMatch(/\| `trainer\.adam\.learningRate` \| number, > 0 \| `0\.05` \| [^|]*SIMULATED trainer/);
  expect(reference).toContain('#### env.kind "openenv"');
  expect(reference).toContain('| `proposers[].model` | string | required |');
});
