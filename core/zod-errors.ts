/** Turning zod's errors into messages a user can act on: one line per bad field, named by its path. */
import type { z } from 'zod';
import { unknownKeyHint } from './did-you-mean';

/**
 * One line per issue. Given the schema, an unknown key is named by its own
 * path, with the nearest key the schema knows there when it is a likely typo
 * ("rollout.groupsize: unknown; did you mean groupSize?").
 */
export function formatZodError(error: z.ZodError, schema?: z.ZodType): string {
  return issueLines(error, schema)
    .map((line) => `  - ${line}`)
    .join('\n');
}

function issueLines(error: z.ZodError, schema: z.ZodType | undefined): string[] {
  return error.issues.flatMap((issue) => {
    if (issue.code !== 'unrecognized_keys' || !schema) return [`${pathText(issue.path)}: ${issue.message}`];
    const known = objectKeysAt(schema, issue.path);
    return issue.keys.map((key) => `${pathText([...issue.path, key])}: unknown${unknownKeyHint(key, known)}`);
  });
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
