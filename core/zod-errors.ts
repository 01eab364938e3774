/** Turning zod's errors into messages a user can act on: one line per bad field, named by its path. */
import type { z } from 'zod';
import { likelyMeant, unknownKeyHint } from './did-you-mean';

/**
 * One line per issue. Given the schema, an unknown key is named by its own
 * path, with the nearest key the schema knows there when it is a likely typo
 * ("rollout.groupsize: unknown; did you mean groupSize?").
 */
export function formatZodError(error: z.ZodError, schema?: z.ZodType): string {
  return formatIssues(zodIssues(error, schema));
}

/** One bad field of a config: its path (`rollout.groupSize`, `(root)` for the whole) and what is wrong with it. */
export interface ConfigIssue {
  path: string;
  message: string;
}

/** The lines of an error message that lists `issues`, one per bad field. */
export function formatIssues(issues: readonly ConfigIssue[]): string {
  return issues.map((issue) => `  - ${issue.path}: ${issue.message}`).join('\n');
}

/** Each bad field of a zod error, an unknown key by its own path with the nearest known key (given the schema). */
export function zodIssues(error: z.ZodError, schema?: z.ZodType): ConfigIssue[] {
  return error.issues.flatMap((issue) => {
    if (issue.code !== 'unrecognized_keys' || !schema)
      return [{ path: pathText(issue.path), message: `${issue.message}${valueHint(issue)}` }];
    const known = objectKeysAt(schema, issue.path);
    return issue.keys.map((key) => ({ path: pathText([...issue.path, key]), message: `unknown${unknownKeyHint(key, known)}` }));
  });
}

/**
 * "; did you mean "vote"?" for a value that is not one of an enum's (or a
 * discriminated union's kinds) and is likely a typo of one. Needs the issue's
 * input: parse with `{ reportInput: true }`.
 */
function valueHint(issue: z.core.$ZodIssue): string {
  const input = (issue as { input?: unknown }).input;
  let value: unknown;
  let known: unknown[] = [];
  if (issue.code === 'invalid_value') {
    value = input;
    known = issue.values;
  } else if (issue.code === 'invalid_union') {
    // A discriminated union's unknown kind: its input is the object, its options the known kinds.
    const { discriminator, options } = issue as { discriminator?: string; options?: unknown[] };
    if (discriminator === undefined || !Array.isArray(options) || input === null || typeof input !== 'object') return '';
    value = (input as Record<string, unknown>)[discriminator];
    known = options;
  }
  if (typeof value !== 'string') return '';
  const meant = likelyMeant(
    value,
    known.filter((k): k is string => typeof k === 'string'),
  );
  return meant === undefined ? '' : `; did you mean "${meant}"?`;
}

/** The paths of every bad field (an unknown key: its own path), for tests and JSON output. */
export function zodErrorPaths(error: z.ZodError): string[] {
  return error.issues.flatMap((issue) =>
    issue.code === 'unrecognized_keys' ? issue.keys.map((key) => [...issue.path, key].join('.')) : [issue.path.join('.')],
  );
}

const pathText = (path: readonly PropertyKey[]) => (path.length ? path.map(String).join('.') : '(root)');

/** Minimal view of zod 4's schema definitions, enough to walk to an object. */
interface SchemaDef {
  type: string;
  shape?: Record<string, z.ZodType>;
  innerType?: z.ZodType;
  in?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
}
const defOf = (schema: z.ZodType) => (schema as unknown as { _zod: { def: SchemaDef } })._zod.def;

/** The keys an object schema knows at `path` (every option's, under a union); none when the path leads elsewhere. */
export function objectKeysAt(schema: z.ZodType, path: readonly PropertyKey[]): string[] {
  const def = defOf(schema);
  switch (def.type) {
    case 'default':
    case 'prefault':
    case 'optional':
    case 'nullable':
      return objectKeysAt(def.innerType!, path);
    case 'pipe':
      return objectKeysAt(def.in!, path);
    case 'union':
      return [...new Set(def.options!.flatMap((option) => objectKeysAt(option, path)))];
    case 'array':
      return typeof path[0] === 'number' ? objectKeysAt(def.element!, path.slice(1)) : [];
    case 'object': {
      if (path.length === 0) return Object.keys(def.shape!);
      const next = def.shape![String(path[0])];
      return next ? objectKeysAt(next, path.slice(1)) : [];
    }
    default:
      return [];
  }
}
