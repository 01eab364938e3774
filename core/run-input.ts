/**
 * The shape of harnessSRun's argument, `{"config": {...}}`, checked where it
 * enters: the CLI's config files and the workflow itself (a run started from
 * the Web UI or the `temporal` CLI). Pure and dependency-free: the workflow
 * bundle imports it. The config inside is checked by core/config.ts.
 */
import { unknownKeyHint } from './did-you-mean';

const INPUT_KEYS = ['config', 'resume', 'recover', 'fork'] as const;

/**
 * A config file as read, without the `$schema` key at its top that points
 * editors at its JSON Schema (examples/*.json have one): it is no part of
 * the config or the workflow input.
 */
export function withoutSchemaKey(json: unknown): unknown {
  if (json === null || typeof json !== 'object' || Array.isArray(json) || !('$schema' in json)) return json;
  const { $schema: _schema, ...rest } = json as Record<string, unknown>;
  return rest;
}

/** Why `input` is not a run input, or null when its shape is right. */
export function runInputProblem(input: unknown): string | null {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) {
    return 'must be a JSON object {"config": {...}} ({"config": {}} runs the embedded default)';
  }
  // `$schema` (an example file's pointer to its JSON Schema) comes along when a file is passed whole, as
  // `temporal workflow start --input "$(cat examples/x.json)"` does: no part of the input, and no error.
  const unknown = Object.keys(input).filter((key) => key !== '$schema' && !(INPUT_KEYS as readonly string[]).includes(key));
  if (unknown.length > 0) {
    return unknown.map((key) => `${key}: unknown${unknownKeyHint(key, INPUT_KEYS)}`).join('; ');
  }
  const config = (input as { config?: unknown }).config;
  if (config === undefined) return 'config: missing ({"config": {}} runs the embedded default)';
  if (typeof config !== 'object' || config === null || Array.isArray(config)) return 'config: must be a JSON object';
  if ('fork' in input) {
    const fork = (input as { fork?: unknown }).fork as { runId?: unknown; step?: unknown } | null;
    if (
      typeof fork !== 'object' ||
      fork === null ||
      typeof fork.runId !== 'string' ||
      !Number.isInteger(fork.step) ||
      (fork.step as number) < 0
    ) {
      return 'fork: must be {"runId": "<parent run>", "step": <the step of its checkpoint>} (harness-s run fork writes it)';
    }
    if (!('resume' in input)) return 'fork: needs resume (the step after the checkpoint, its policy and profile versions)';
  }
  return null;
}
