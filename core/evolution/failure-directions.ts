/**
 * Which repair direction a failure calls for. The diagnosis groups the base
 * harness's failures by type and hands each group to the directions mapped
 * here; an env may map differently (its registration's `failureDirections`),
 * and an evolution config may override either per failure type
 * (`failureDirections`).
 *
 * The default mapping (every env that does not map otherwise):
 * - format_error    -> action_realization    (the intended action was not executed: parsing, format)
 * - execution_error -> environment_contract  (the env refused it: schema, dialect, tool docs)
 * - wrong_answer    -> procedural_skill, environment_contract (domain know-how; what the env's data means)
 * - turn_limit      -> trajectory_regulation (turn budget, loops)
 * - policy_error    -> none (the endpoint failed; no harness repairs that)
 */
import type { RepairDirection } from '../harness/direction';
import type { FailureType } from '../policy/trajectory';

export type SiblingDirection = Exclude<RepairDirection, 'base'>;
export const SIBLING_DIRECTIONS: readonly SiblingDirection[] = [
  'action_realization',
  'environment_contract',
  'trajectory_regulation',
  'procedural_skill',
];

export type FailureDirections = Record<FailureType, SiblingDirection[]>;

const DEFAULT_MAPPING: FailureDirections = {
  format_error: ['action_realization'],
  execution_error: ['environment_contract'],
  wrong_answer: ['procedural_skill', 'environment_contract'],
  turn_limit: ['trajectory_regulation'],
  policy_error: [],
};

/** The mapping an evolution uses: the default, then its env's (`envMapping`), then the config's overrides. */
export function failureDirectionsFor(
  envMapping: Partial<FailureDirections> = {},
  overrides: Partial<FailureDirections> = {},
): FailureDirections {
  return { ...DEFAULT_MAPPING, ...envMapping, ...overrides };
}

/** What each direction repairs, in the words a proposer is given. */
export const DIRECTION_MEANING: Record<SiblingDirection, string> = {
  action_realization:
    'Action realization: get the action the model intended executed. Format instructions, repairing malformed or misplaced action text, refusing actions the env would misread.',
  environment_contract:
    'Environment contract: state what the environment accepts and expects. Its schema, tool documentation, dialect, and notes on its error messages.',
  trajectory_regulation:
    'Trajectory regulation: shape the course of an episode. Turn budget, loop detection, verifying before finishing, warnings near the end of the budget.',
  procedural_skill: 'Procedural skill: domain know-how. Recipes and worked procedures for the kinds of tasks that fail.',
};

/** The short prefix of candidate ids of a direction (ar-r1-c2: round 1, slot 2). */
export const DIRECTION_PREFIX: Record<SiblingDirection, string> = {
  action_realization: 'ar',
  environment_contract: 'ec',
  trajectory_regulation: 'tr',
  procedural_skill: 'ps',
};
