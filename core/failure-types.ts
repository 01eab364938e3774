/**
 * The `type` of every ApplicationFailure that activities and workflows raise
 * by name, written once: the workflows decide what to do with a failure by
 * its type (workflows/failures.ts), so a misspelt type would turn an outage
 * into a failed group or a failed run.
 *
 * A UserError subclass (core/errors.ts) reaches Temporal under its class
 * name; the ones a workflow or an activity also raises by name are here too.
 *
 * Imported by workflow code: no I/O, no node built-ins.
 */
export const FAILURE_TYPES = {
  // Outages: the run pauses itself with the reason (workflows/failures.ts).
  /** The policy endpoint or an inference server cannot be reached or answers with a server error. */
  PolicyUnavailable: 'PolicyUnavailable',
  /** The trainer cannot be reached or answers with a server error. */
  TrainerUnavailable: 'TrainerUnavailable',
  /** Every base group of a step failed: the environment is what fails. */
  AllGroupsFailed: 'AllGroupsFailed',

  /** The trainer lost the run's model: the run restores it from a checkpoint. */
  TrainerModelLost: 'TrainerModelLost',

  // Final: the run (or evolution) fails with the message.
  /** The run config or the workflow input is invalid (also core/config.ts RunConfigError's name). */
  RunConfigError: 'RunConfigError',
  /** A fork's parent has no checkpoint to start from (also core/trainer/trainer-restore.ts NoCheckpointError's name). */
  NoCheckpointError: 'NoCheckpointError',
  /** The policy endpoint refuses the request itself (bad model or adapter name, bad key). */
  PolicyRequestRefused: 'PolicyRequestRefused',
  /** The trainer refuses the request itself. */
  TrainerRequestRefused: 'TrainerRequestRefused',
  /** An evaluation's two arms have unequal sizes. */
  UnequalEvaluationArms: 'UnequalEvaluationArms',
  UnknownRun: 'UnknownRun',
  UnknownTask: 'UnknownTask',
  UnknownHarness: 'UnknownHarness',
  MissingProfiles: 'MissingProfiles',
  UnknownEvolution: 'UnknownEvolution',
  UnknownCandidate: 'UnknownCandidate',
  /** An evolution would run more rollout groups than one workflow history holds well. */
  EvolutionTooLarge: 'EvolutionTooLarge',
  /** A proposal recorded as accepted no longer passes this version's checks. */
  RecordedProposalInvalid: 'RecordedProposalInvalid',
} as const;

export type ApplicationFailureType = (typeof FAILURE_TYPES)[keyof typeof FAILURE_TYPES];

/** Failure types that mean an endpoint is down or failing, not that the work is wrong: the run pauses on them. */
export const OUTAGE_TYPES: readonly ApplicationFailureType[] = [
  FAILURE_TYPES.PolicyUnavailable,
  FAILURE_TYPES.TrainerUnavailable,
  FAILURE_TYPES.AllGroupsFailed,
];
