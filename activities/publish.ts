/**
 * publishPolicy and republishPolicy: a trainer step's weights made servable on
 * every inference server (core/policy/sampler-weights.ts, publisher.ts), under
 * a heartbeat clock: unpacking a big adapter takes minutes.
 */
import { Context } from '@temporalio/activity';
import { publishAdapter, type PublishResult } from '../core/policy/publisher';
import { adapterDirFromEnv, resolveSamplerWeights } from '../core/policy/sampler-weights';
import { defaultClients } from './clients';
import { withHeartbeatClock } from './heartbeat';
import type { ActivityDeps, RunContext } from './run-context';

/** What publishing a policy version did, small enough for the step summary. */
export interface PublishSummary {
  servers: number;
  /** The largest mean |Δ| log-prob between a server's answer to the probe and the trainer's; null without a probe. */
  probeMeanAbsDiff: number | null;
  /** Servers that had the adapter name with other weights and loaded the step's in place. */
  reloaded: number;
}

export function createPublishActivities(deps: ActivityDeps, context: RunContext) {
  const { store, logger } = deps;
  const clients = deps.clients ?? defaultClients;

  /**
   * Makes a trainer step's weights servable on every inference server: its sampler weights unpacked
   * to a local directory, loaded as LoRA adapter `policyVersion`, checked against the trainer's probe.
   */
  async function publishEverywhere(runId: string, step: number, policyVersion: string, samplerPath: string, probeOf = { runId, step }): Promise<PublishSummary> {
    const { config } = await context.loadRun(runId);
    const servers = config.policy.inferenceServers.length ? config.policy.inferenceServers : [config.policy.baseUrl];
    const signal = Context.current().cancellationSignal;
    const probe = (await store.trainerStep(probeOf.runId, probeOf.step))?.probe ?? null;
    let phase = 'unpacking the sampler weights';
    return await withHeartbeatClock(
      () => ({ step, phase }),
      async () => {
        const adapterDir = await resolveSamplerWeights({
          samplerPath,
          trainer: clients.trainer(config, signal),
          checkpointsDir: config.trainer.checkpointsDir,
          adapterDir: deps.adapterDir ?? adapterDirFromEnv(),
        });
        const results: PublishResult[] = [];
        for (const server of servers) {
          phase = `loading on ${server}`;
          results.push(
            await publishAdapter({ server, apiKey: clients.policyApiKey(config), adapterName: policyVersion, adapterDir, probe, tolerance: config.policy.probeTolerance, signal }),
          );
        }
        const diffs = results.flatMap((r) => (r.probeMeanAbsDiff === null ? [] : [r.probeMeanAbsDiff]));
        logger.info({ runId, step, policyVersion, servers: results }, 'policy published');
        return { servers: results.length, probeMeanAbsDiff: diffs.length ? Math.max(...diffs) : null, reloaded: results.filter((r) => r.reloaded).length };
      },
    );
  }

  return {
    /**
     * Makes a policy version servable on every inference server (vLLM runtime LoRA loading), checked by the
     * probe of the step that trained it, or of `probeOf` (a restored or forked model: the step whose state it loaded).
     */
    async publishPolicy(input: { runId: string; step: number; policyVersion: string; samplerPath: string; probeOf?: { runId: string; step: number } }): Promise<PublishSummary> {
      return publishEverywhere(input.runId, input.step, input.policyVersion, input.samplerPath, input.probeOf);
    },

    /** On resume: inference servers may have restarted and lost their runtime LoRA adapters; load the current one again. */
    async republishPolicy(input: { runId: string; step: number }): Promise<void> {
      const trained = await store.trainerStep(input.runId, input.step);
      if (trained) await publishEverywhere(input.runId, input.step, trained.policyVersion, trained.samplerPath);
    },
  };
}
