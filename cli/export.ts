/**
 * `harness-s export RUN`: the run's stored config names its trainer (where the
 * sampler weights are) and its inference server (where the export is checked);
 * the export itself is core/publish/export.ts. Results go to stdout, progress
 * to stderr, as every command does.
 */
import { parseStoredRunConfig } from '../core/config';
import { UserError } from '../core/errors';
import { checkServerOf, exportPolicy, type ExportCheck, type ExportManifest } from '../core/publish/export';
import { TinkerClient } from '../core/trainer/tinker/client';
import { apiKeyOf } from '../core/secrets';
import type { RunStore } from '../core/store/run-store';

export interface ExportResult {
  dir: string;
  manifest: ExportManifest;
  /** null: not checked (--no-check). */
  check: ExportCheck | null;
}

export async function exportRun(
  store: RunStore,
  args: { runId: string; step?: number; outDir: string; force?: boolean; check: boolean },
  progress: (line: string) => void,
): Promise<ExportResult> {
  const run = await store.getRun(args.runId);
  if (!run) throw new UserError(`no run ${args.runId} in the run store (see \`harness-s run list\`)`);
  const config = parseStoredRunConfig(run.config, `stored config of ${args.runId}`);
  const trainer = new TinkerClient({
    baseUrl: config.trainer.baseUrl,
    apiKey: apiKeyOf(config.trainer, 'trainer'),
    pollSeconds: config.trainer.pollSeconds,
    maxConnectionRetrySeconds: config.retry?.maxIntervalSeconds,
  });
  const check = args.check
    ? { server: checkServerOf(config), apiKey: apiKeyOf(config.policy, 'policy'), tolerance: config.policy.probeTolerance }
    : undefined;
  return exportPolicy(
    { store, trainer },
    { runId: args.runId, step: args.step, outDir: args.outDir, force: args.force, check, onProgress: progress },
  );
}

/** What `export` prints: the folder first (for scripts), then what it holds and how the check went. */
export function exportText(result: ExportResult): string {
  const { manifest, check } = result;
  const lines = [
    result.dir,
    `step ${manifest.step} of ${manifest.runId}: policy version ${manifest.policyVersion}, base model ${manifest.baseModel}, config ${manifest.configHash.slice(0, 12)}`,
  ];
  if (manifest.label) lines.push(manifest.label);
  lines.push(checkText(check));
  return lines.join('\n');
}

function checkText(check: ExportCheck | null): string {
  if (!check) return 'check: skipped (--no-check)';
  if (check.skipped) return `check: skipped: ${check.skipped}`;
  const unloaded = check.unloaded
    ? 'unloaded after'
    : `NOT unloaded: POST ${check.server}/unload_lora_adapter {"lora_name": "${check.adapterName}"} to free it`;
  return `check: passed on ${check.server}: mean |Δ| log-prob ${check.probeMeanAbsDiff!.toExponential(2)} from the trainer's probe (tolerance ${check.tolerance}); adapter ${check.adapterName} ${unloaded}`;
}
