/** `harness-s` eval: an endpoint under one harness, on an env's tasks. */
import { type Command, InvalidArgumentError } from 'commander';
import { NO_API_KEY } from '../../core/secrets';
import { evaluate, rank1FromEvals } from '../eval';
import { evalTable, evalTableText } from '../eval-report';
import { createEnvironment, fetchFrozenPool, resolveHarness } from '../../core/envs/registry';
import { newRunId, readConfigFile, UserError, validateConfig } from '../runs';
import { EnvConfig, ENV_KINDS } from '../../core/envs/env-configs';
import { print, printJson, progress, action, withStore, positiveInt, examplesText } from './shared';

export function registerEvalCommand(program: Command): void {
  program
    .command('eval')
    .description('evaluate an OpenAI-compatible endpoint under one harness; results stored in PostgreSQL')
    .option('--env <kind>', `the env: ${ENV_KINDS.join(' | ')} (or the env of --config)`)
    .option('--config <file>', "take the env from a run config (any kind: a module env, an OpenEnv env's servers, ...)")
    .option('--env-config <json>', 'more env fields, as JSON, e.g. \'{"observationField": "text"}\'')
    .option(
      '--data <file>',
      "the env's task file (dbbench, swe: data; charset, openenv: tasks; appworld: APPWORLD_ROOT, default the fixture world)",
    )
    .option('--dataset <name>', 'appworld: the dataset (data/datasets/<name>.txt; default fixture)')
    .option('--url <urls>', 'openenv: servers already running, comma-separated (default: the workers start the shipped keypad env)')
    .requiredOption('--harness <fileOrId>', "a harness spec file, or a harness id of the env's pool (e.g. base)")
    .requiredOption('--base-url <url>', 'OpenAI-compatible endpoint, ending in /v1')
    .requiredOption('--model <name>', 'model name at that endpoint')
    .option('--api-key-env <name>', "the environment variable that holds the endpoint's API key (none sent when unset)", 'OPENAI_API_KEY')
    .option('--limit <n>', 'first N tasks only', positiveInt('--limit'))
    .option('--tasks <ids>', 'only these task ids, comma-separated')
    .option('--concurrency <n>', 'episodes at once', positiveInt('--concurrency'), 4)
    .option('--max-turns <n>', 'rounds per episode', positiveInt('--max-turns'), 15)
    .option('--samples <n>', 'episodes per task, each with its own seed (with --temperature above 0)', positiveInt('--samples'), 1)
    .option('--max-tokens <n>', 'tokens per reply at most (default: the server limit)', positiveInt('--max-tokens'))
    .option('--temperature <t>', 'sampling temperature (0: greedy)', temperatureOption, 0)
    .option('--scoring <mode>', 'dbbench: exact | normalized (default exact)')
    .option(
      '--route-from <evalIds>',
      "Rank-1 routing: each task kind runs under the harness with the best success on that kind in these evals (comma-separated eval ids, e.g. of the pool's harnesses on a train split); --harness runs the kinds they did not see",
    )
    .option('--json', 'machine-readable')
    .addHelpText(
      'after',
      examplesText(
        'eval --env dbbench --data data/dbbench/dev.jsonl --harness base --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B',
        'eval --config examples/swe.json --harness base --base-url http://127.0.0.1:8000/v1 --model Qwen/Qwen3-8B --limit 5 --json',
        'eval --config examples/smollm2.json --harness base --route-from EVAL1,EVAL2 --base-url http://127.0.0.1:8000/v1 --model smollm2-135m',
      ),
    )
    .action(
      action(
        async (
          opts: {
            harness: string;
            baseUrl: string;
            model: string;
            apiKeyEnv: string;
            limit?: number;
            tasks?: string;
            concurrency: number;
            maxTurns: number;
            samples: number;
            maxTokens?: number;
            temperature: number;
            routeFrom?: string;
            json?: boolean;
          } & EvalEnvOptions,
        ) => {
          const envConfig = evalEnvConfig(opts);
          await withStore(async (store) => {
            // A frozen pool (env.pool) this machine lacks comes from the run store.
            await fetchFrozenPool(envConfig, store.evolutions);
            const env = createEnvironment(envConfig);
            try {
              const harness = resolveHarness(envConfig, env, opts.harness);
              const routes = opts.routeFrom === undefined ? undefined : await rank1FromEvals(store, env, harness, opts.routeFrom);
              if (routes && !opts.json)
                progress(
                  `Rank-1 routes: ${Object.entries(routes)
                    .map(([kind, h]) => `${kind} -> ${h.id}`)
                    .join(', ')}`,
                );
              const result = await evaluate({
                evalId: newRunId(`eval-${env.id}-${routes ? 'rank1' : harness.id}`),
                env,
                envConfig,
                harness,
                routes,
                baseUrl: opts.baseUrl,
                model: opts.model,
                apiKey: process.env[opts.apiKeyEnv] || NO_API_KEY,
                limit: opts.limit,
                taskIds: opts.tasks
                  ?.split(',')
                  .map((t) => t.trim())
                  .filter(Boolean),
                concurrency: opts.concurrency,
                maxTurns: opts.maxTurns,
                samples: opts.samples,
                maxTokens: opts.maxTokens,
                temperature: opts.temperature,
                seed: 1,
                store,
                progress: !opts.json,
              });
              const table = evalTable(env, result);
              if (opts.json)
                return printJson({
                  evalId: result.evalId,
                  harness: result.harness,
                  model: result.model,
                  total: result.total,
                  passed: result.passed,
                  interval95: result.interval95,
                  ...(routes ? { routes: Object.fromEntries(Object.entries(routes).map(([kind, h]) => [kind, h.id])) } : {}),
                  byKind: result.byKind,
                  failures: result.failures,
                  ...table,
                });
              print(evalTableText(result, table));
            } finally {
              await env.close?.();
            }
          });
        },
      ),
    );
}

export interface EvalEnvOptions {
  env?: string;
  config?: string;
  envConfig?: string;
  data?: string;
  dataset?: string;
  url?: string;
  scoring?: string;
  concurrency: number;
}

/** The fields of an env config that take a task file, in the order --data looks for them. */
const DATA_FIELDS = ['data', 'tasks', 'root', 'world'];

/**
 * The env an eval runs on: the env of --config, or --env, with the options
 * that env's config has (--data goes to its task-file field; --url to its
 * servers), then --env-config on top, validated like a run config's env.
 */
export function evalEnvConfig(opts: EvalEnvOptions): EnvConfig {
  const base: Record<string, unknown> = opts.config ? { ...readConfigFile(opts.config).config.env } : {};
  const kind = opts.env ?? (base.kind as string | undefined);
  if (kind === undefined) throw new UserError('eval: give --env <kind> or --config <run config>');
  const schema = EnvConfig.options.find((option) => option.shape.kind.value === kind);
  if (!schema) throw new UserError(`eval --env: no env kind '${kind}' (the kinds: ${ENV_KINDS.join(', ')})`);
  const fields = Object.keys(schema.shape);
  const env: Record<string, unknown> = { ...base, kind };
  const set = (option: string, field: string | undefined, value: unknown) => {
    if (value === undefined) return;
    if (field === undefined || !fields.includes(field)) throw new UserError(`eval ${option}: env ${kind} has no such setting`);
    env[field] = value;
  };
  set(
    '--data',
    DATA_FIELDS.find((f) => fields.includes(f)),
    opts.data,
  );
  set('--dataset', 'dataset', opts.dataset);
  set('--scoring', 'scoring', opts.scoring);
  set(
    '--url',
    'servers',
    opts.url?.split(',').map((url) => ({ url: url.trim(), sessions: opts.concurrency })),
  );
  if (opts.envConfig !== undefined) {
    let extra: unknown;
    try {
      extra = JSON.parse(opts.envConfig);
    } catch (err) {
      throw new UserError(`eval --env-config: not JSON: ${(err as Error).message}`);
    }
    if (typeof extra !== 'object' || extra === null || Array.isArray(extra))
      throw new UserError('eval --env-config: must be a JSON object of env fields');
    Object.assign(env, extra);
  }
  return validateConfig({ env }, 'eval options').env;
}

function temperatureOption(value: string): number {
  const t = Number(value);
  if (!Number.isFinite(t) || t < 0 || t > 2) throw new InvalidArgumentError(`--temperature: ${value} is not a number from 0 to 2`);
  return t;
}
