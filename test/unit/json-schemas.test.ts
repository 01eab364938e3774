/**
 * The JSON Schemas checked in under examples/ (for editors and the Temporal
 * UI) are the ones the code gives: a config field added, renamed or
 * documented anew shows up in them once `npm run schema` is run.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runConfigJsonSchema } from '../../core/config';
import { evolutionConfigJsonSchema } from '../../core/evolution/config';

const examples = path.join(__dirname, '../../examples');

/** Fails with the file to regenerate and the difference, when the checked-in schema is not the generated one. */
function expectCheckedIn(file: string, generated: unknown): void {
  const checkedIn: unknown = JSON.parse(readFileSync(path.join(examples, file), 'utf8'));
  try {
    expect(JSON.parse(JSON.stringify(generated))).toEqual(checkedIn);
  } catch (err) {
    if (err instanceof Error)
      err.message = `examples/${file} differs from the schema the code gives: run \`npm run schema\` and check in the result.\n\n${err.message}`;
    throw err;
  }
}

test('examples/run-config.schema.json is the schema of RunConfig', () => {
  expectCheckedIn('run-config.schema.json', runConfigJsonSchema());
});

test('examples/evolution-config.schema.json is the schema of EvolutionConfig', () => {
  expectCheckedIn('evolution-config.schema.json', evolutionConfigJsonSchema());
});
