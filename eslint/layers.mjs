// The layer order of the house, lowest first. A file may import files of its own
// layer and of the layers below it, never above; the first layer whose pattern
// matches a file is its layer. docs/architecture.md explains each layer.
export const LAYERS = [
  // core: the domain, no Temporal, bottom to top.
  {
    name: 'core-base',
    files: [
      'core/errors.ts',
      'core/random.ts',
      'core/stats.ts',
      'core/concurrency.ts',
      'core/did-you-mean.ts',
      'core/zod-errors.ts',
      'core/settings.ts',
      'core/secrets.ts',
      'core/failure-types.ts',
      'core/metrics.ts',
      'core/viewer-address.ts',
      'core/sim-kind.ts',
      'core/latency-profiles.ts',
      'core/run-budget.ts',
      'core/run-input.ts',
    ],
  },
  {
    name: 'core-config',
    files: [
      'core/config.ts',
      'core/config-*.ts',
      'core/envs/config-parts.ts',
      'core/envs/sandbox-config.ts',
      'core/envs/env-configs.ts',
      'core/envs/*/config.ts',
      'core/tracking/tracker-configs.ts',
      'core/tracking/*/config.ts',
      'core/policy/replicas.ts',
      'core/rl/step-slices.ts',
    ],
  },
  { name: 'core-policy', files: ['core/policy/**'] },
  { name: 'core-harness', files: ['core/harness/**'] },
  { name: 'core-rl', files: ['core/rl/**'] },
  { name: 'core-router', files: ['core/router/**'] },
  { name: 'core-evolution', files: ['core/evolution/**'] },
  { name: 'core-envs', files: ['core/envs/**'] },
  { name: 'core-store', files: ['core/store/**'] },
  { name: 'core-trainer', files: ['core/trainer/**'] },
  { name: 'core-services', files: ['core/publish/**', 'core/report/**', 'core/tracking/**', 'core/bench/**', 'core/run-lineage.ts'] },
  // Around core, bottom to top.
  { name: 'activities', files: ['activities/**'] },
  { name: 'workflows', files: ['workflows/**'] },
  { name: 'workers', files: ['workers/**'] },
  { name: 'sim-cluster', files: ['sim-cluster/**'] },
  { name: 'viewer', files: ['viewer/**'] },
  { name: 'infra', files: ['infra/**'] },
  { name: 'cli', files: ['cli/**', 'bin/**'] },
];
