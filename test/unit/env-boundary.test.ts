/**
 * One env boundary: every env kind the config schema knows has a
 * registration and the other way round, and outside its own folder core
 * names a shipped env's kind nowhere (the registry reaches it through its
 * registration's import).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { EnvConfig, ENV_KINDS } from '../../core/envs/env-configs';
import { ENV_REGISTRATIONS } from '../../core/envs/registry';

const CORE = path.resolve(__dirname, '../../core');

function tsFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const file = path.join(dir, name);
    return statSync(file).isDirectory() ? tsFiles(file) : file.endsWith('.ts') ? [file] : [];
  });
}

/** A file's code without its comments (docs may name envs). */
const code = (text: string) => text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/^\s*\/\/.*$/gm, '');

test('the config schema and the registry know the same env kinds', () => {
  expect([...ENV_REGISTRATIONS.keys()].sort()).toEqual([...ENV_KINDS].sort());
  // Each registration holds the very schema the config union checks, so the two cannot drift apart.
  for (const [kind, registration] of ENV_REGISTRATIONS)
    expect(EnvConfig.options.find((schema) => schema.shape.kind.value === kind)).toBe(registration.config);
});

// The simulator's kind is also named once at the bottom of core (sim-kind.ts), so
// the config and every report can label SIMULATED results without the sim's code.
const NAMES_ITS_KIND: Record<string, string> = { sim: path.join(CORE, 'sim-kind.ts') };

test.each([...ENV_REGISTRATIONS.keys()])("core names the kind '%s' only in its own folder", (kind) => {
  const literal = new RegExp(`['"\`]${kind}['"\`]`);
  const outside = tsFiles(CORE)
    .filter((file) => !file.startsWith(path.join(CORE, 'envs', kind) + path.sep) && file !== NAMES_ITS_KIND[kind])
    .filter((file) => literal.test(code(readFileSync(file, 'utf8'))))
    .map((file) => path.relative(CORE, file));
  expect(outside).toEqual([]);
});
