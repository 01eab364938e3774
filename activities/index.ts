/**
 * Activities: thin Temporal adapters over core/, one file per concept, built
 * by a factory over their dependencies (the run store, the environment of a
 * config, the policy and trainer clients), so tests and workers pass in what
 * they need. Each one is idempotent: it reads what the store already has
 * before doing any work, or its write keeps the first record (ON CONFLICT
 * DO NOTHING).
 *
 *   runs.ts        prepareRun, updateRunConfig, recordStep, recordEvaluation, summarizeRun
 *   tasks.ts       sampleTasks, describeTasks
 *   rollouts.ts    runRolloutGroup                 (task queue harness-s-rollout)
 *   routing.ts     saveProfiles, chooseRescueHarnesses, rank1Routes
 *   train-step.ts  trainStep, restoreTrainer       (task queue harness-s-trainer)
 *   training-batch.ts storeTrainingBatch           (a step's batch, by reference for trainStep)
 *   publish.ts     planPublish, planRepublish, loadPolicyOnReplica (control, or a replica's own queue),
 *                  publishPolicy, republishPolicy (histories from before the fan-out)
 *   tracking.ts    trackRun                         (experiment trackers: MLflow)
 *   evolution.ts   prepareEvolution, runEvolutionGroup (harness-s-rollout), proposeCandidate,
 *                  recordSelection, freezePool   (workflow evolveHarnessPool)
 */
import { ReplicaAddresses } from '../core/policy/replica-addresses';
import { ReplicaBalancer } from '../core/policy/replica-balancer';
import { asWorkflowFailure } from './failures';
import { createEvolutionActivities } from './evolution';
import { createPublishActivities, replicaLoadDepsFor } from './publish';
import { createRolloutActivities } from './rollouts';
import { createRoutingActivities } from './routing';
import { type ActivityDeps, createRunContext } from './run-context';
import { createRunActivities } from './runs';
import { createTaskActivities } from './tasks';
import { createRestoreTrainer, createTrainStep } from './train-step';
import { createTrackingActivities } from './tracking';
import { createTrainingBatchActivities } from './training-batch';

export type { ActivityDeps } from './run-context';
export type { ActivityClients } from './clients';
export type { PublishPlan, PublishSummary } from './publish';
export type { RolloutGroupResult } from './rollouts';

export function createActivities(given: ActivityDeps) {
  const deps: ActivityDeps = {
    ...given,
    balancer: given.balancer ?? new ReplicaBalancer({ readiness: given.store.replicas, logger: given.logger }),
    replicaAddresses: given.replicaAddresses ?? new ReplicaAddresses(),
  };
  const context = createRunContext(deps);
  return classifyingFailures({
    ...createRunActivities(deps, context),
    ...createTaskActivities(context),
    ...createRolloutActivities(deps, context),
    ...createRoutingActivities(deps, context),
    trainStep: createTrainStep(deps, context),
    restoreTrainer: createRestoreTrainer(deps, context),
    ...createTrainingBatchActivities(deps),
    ...createPublishActivities(deps, context),
    ...createTrackingActivities(deps),
    ...createEvolutionActivities(deps),
  });
}

/** What this worker's replica keepers need to load a run's version (core/publish/replica-keeper.ts). */
export function replicaKeeperLoads(deps: ActivityDeps) {
  return replicaLoadDepsFor(deps, createRunContext(deps));
}

/** Every activity, wrapped so that its errors say what the workflow should do: fail the run, pause it, or retry (failures.ts). */
function classifyingFailures<T extends Record<string, (input: never) => Promise<unknown>>>(activities: T): T {
  const wrapped = Object.entries(activities).map(([name, activity]) => [
    name,
    async (input: never) => {
      try {
        return await activity(input);
      } catch (err) {
        return asWorkflowFailure(err);
      }
    },
  ]);
  return Object.fromEntries(wrapped) as T;
}

export type Activities = ReturnType<typeof createActivities>;
export type EvolutionActivities = ReturnType<typeof createEvolutionActivities>;
/** The activities of a run (without the evolution's): what a run's workflows call. */
export type RunActivities = Omit<Activities, keyof EvolutionActivities>;
