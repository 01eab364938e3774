/** Turning zod's errors into messages a user can act on: one line per bad field, named by its path. */
import type { z } from 'zod';

export function formatZodError(error: z.ZodError): string {
  return error.issues
    .map((issue) => `  - ${issue.path.length ? issue.path.join('.') : '(root)'}: ${issue.message}`)
    .join('\n');
}

/** The paths of every bad field, for tests and JSON output. */
export function zodErrorPaths(error: z.ZodError): string[] {
  return error.issues.map((issue) => issue.path.join('.'));
}
