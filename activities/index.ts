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
 *   publish.ts     publishPolicy, republishPolicy
 *   tracking.ts    trackRun                         (experiment trackers: MLflow)
 *   evolution.ts   prepareEvolution, runEvolutionGroup (harness-s-rollout), proposeCandidate,
 *                  recordSelection, freezePool   (workflow evolveHarnessPool)
 */
import { asWorkflowFailure } from './failures';
import { createEvolutionActivities } from './evolution';
import { createPublishActivities } from './publish';
import { createRolloutActivities } from './rollouts';
import { createRoutingActivities } from './routing';
import { type ActivityDeps, createRunContext } from './run-context';
import { createRunActivities } from './runs';
import { createTaskActivities } from './tasks';
import { createRestoreTrainer, createTrainStep } from './train-step';
import { createTrackingActivities } from './tracking';

export type { ActivityDeps } from './run-context';
export type { ActivityClients } from './clients';
export type { PublishSummary } from './publish';

export function createActivities(deps: ActivityDeps) {
  const context = createRunContext(deps);
  return classifyingFailures({
    ...createRunActivities(deps, context),
    ...createTaskActivities(context),
    ...createRolloutActivities(deps, context),
    ...createRoutingActivities(deps, context),
    trainStep: createTrainStep(deps, context),
    restoreTrainer: createRestoreTrainer(deps, context),
    ...createPublishActivities(deps, context),
    ...createTrackingActivities(deps),
    ...createEvolutionActivities(deps),
  });
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
