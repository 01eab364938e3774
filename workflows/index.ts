/** Every workflow the worker registers; this file is the bundle's entry point. */
export { harnessSRun } from './run';
export { trainingStep } from './training-step';
export { trainingStepSlice } from './step-slice';
export { reanchorProfiles } from './reanchor-profiles';
export { evaluatePolicy } from './evaluation';
export { evolveHarnessPool } from './evolve-harness-pool';
