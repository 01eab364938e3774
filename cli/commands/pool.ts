/** `harness-s` pool ...: sibling harness pools. */
import type { Command } from 'commander';
import { existsSync, writeFileSync } from 'node:fs';
import { filesNamedBy } from '../../core/config';
import { uiUrlFor } from '../../infra/temporal-dev-server';
import { temporalAddressFromEnv } from '../../workers/temporal-env';
import { connectClient, UserError } from '../runs';
import {
  effectText,
  evolutionJson,
  evolutionText,
  poolList,
  poolShowJson,
  poolShowText,
  readEvolutionConfigFile,
  startEvolution,
} from '../pools';
import { evolutionConfigFileJsonSchema } from '../../core/evolution/config';
import { progress, print, printJson, action, withStore, examplesText } from './shared';

export function registerPoolCommands(program: Command): void {
  const pool = program
    .command('pool')
    .description('sibling harness pools: evolve one from the base harness (Directional Harness Evolution), show, list')
    .addHelpText('after', examplesText('pool evolve --evolution examples/evolve-sim.json --wait', 'pool list', 'pool show <pool>'));
  pool
    .command('evolve')
    .description('evolve a sibling pool from the base harness and freeze it (workflow evolveHarnessPool; needs `harness-s dev` or workers)')
    .requiredOption(
      '--evolution <file>',
      'an evolution config JSON file (see examples/evolve-sim.json), or a workflow input {"config": {...}}',
    )
    .option('--wait', 'wait for the frozen pool and print it')
    .option('--json', 'wait, then print {"pool", "siblings": [...]} as JSON')
    .addHelpText(
      'after',
      examplesText('pool evolve --evolution examples/evolve-sim.json', 'pool evolve --evolution examples/evolve-sim.json --wait --json'),
    )
    .action(
      action(async (opts: { evolution: string; wait?: boolean; json?: boolean }) => {
        const { raw, config: parsed } = readEvolutionConfigFile(opts.evolution);
        const missing = filesNamedBy(parsed).filter(({ file }) => !existsSync(file));
        if (parsed.base !== undefined && !existsSync(parsed.base)) missing.push({ path: 'base', file: parsed.base });
        if (missing.length)
          throw new UserError(`${opts.evolution}: ${missing.map((m) => `${m.path}: ${m.file} does not exist`).join('; ')}`);
        const { handle, attached } = await startEvolution(await connectClient(), raw, parsed);
        progress(
          `${attached ? 'attached to the running' : 'started'} evolution ${handle.workflowId}; Web UI ${uiUrlFor(temporalAddressFromEnv())}/namespaces/default/workflows/${encodeURIComponent(handle.workflowId)}`,
        );
        if (!opts.wait && !opts.json) return print(handle.workflowId);
        const result = await handle.result();
        if (opts.json) printJson(evolutionJson(result));
        else
          print(`${evolutionText(result)}
  ${effectText(result.effect)}`);
      }),
    );
  pool
    .command('show <pool>')
    .description(
      'a frozen pool (its hash, a unique prefix, or the evolution name): members, lineage tree, effect matrix with locality and complementarity',
    )
    .option('--json', 'machine-readable: {"pool", "env", "simulated", "createdAt", "evolution", "members", "candidates", "effect"}')
    .addHelpText('after', examplesText('pool show <pool>', 'pool show <pool> --json'))
    .action(
      action(async (ref: string, opts: { json?: boolean }) => {
        await withStore(async (store) =>
          opts.json ? printJson(await poolShowJson(store.evolutions, ref)) : print(await poolShowText(store.evolutions, ref)),
        );
      }),
    );
  pool
    .command('list')
    .description('the frozen pools in the run store, newest first: hash, env, evolution, creation time, siblings')
    .option('--json', 'machine-readable')
    .addHelpText('after', examplesText('pool list', 'pool list --json'))
    .action(
      action(async (opts: { json?: boolean }) => {
        const pools = await withStore((store) => poolList(store.evolutions));
        if (opts.json) return printJson(pools);
        if (pools.length === 0)
          return print('no frozen pools (evolve one with `harness-s pool evolve --evolution examples/evolve-sim.json --wait`)');
        for (const p of pools)
          print(`${p.pool}  ${p.env.padEnd(8)} ${String(p.evolution ?? '-').padEnd(20)} ${p.createdAt}  ${p.siblings.join(' ')}`);
      }),
    );
  pool
    .command('schema')
    .description('the JSON Schema of an evolution config')
    .option('--out <file>', 'write it to a file instead of stdout')
    .addHelpText('after', examplesText('pool schema', 'pool schema --out examples/evolution-config.schema.json'))
    .action(
      action(async (opts: { out?: string }) => {
        const schema = JSON.stringify(evolutionConfigFileJsonSchema(), null, 2);
        if (opts.out) writeFileSync(opts.out, `${schema}\n`);
        else print(schema);
      }),
    );
}
