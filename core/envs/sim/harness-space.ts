/**
 * The space evolution's candidates live in for the sim: SimHarness files
 * (core/envs/sim/world.ts), which fields each repair direction may change
 * (see core/evolution/harness-space.ts for the table), and the world's rule
 * that environment_contract adds only the behaviours that consult the
 * environment (`contractBehaviours`) while procedural_skill and
 * trajectory_regulation hint only the others.
 */
import { z } from 'zod';
import { FREE_FIELDS, zodCheck, type HarnessSpace } from '../../evolution/harness-space';
import type { SiblingDirection } from '../../evolution/failure-directions';
import { SIM_KIND } from '../../sim-kind';
import { simHarness } from './harnesses';
import { FINISH, SimHarness, type SimWorld } from './world';

const SIM_MAY_CHANGE: Record<SiblingDirection, string[]> = {
  action_realization: ['formatHint', 'scaffold.repairFormat'],
  environment_contract: ['hints', 'scaffold.performs'],
  trajectory_regulation: ['extraTurns', 'avoid', 'hints'],
  procedural_skill: ['hints'],
};

const SIM_FIELDS = [...FREE_FIELDS, 'hints', 'avoid', 'formatHint', 'scaffold.performs', 'scaffold.repairFormat', 'extraTurns'];
/** The sim's harness space: SimHarness files, checked against the world's behaviours. */
export function simHarnessSpace(world: SimWorld): HarnessSpace {
  const actions = new Set([...world.behaviours, FINISH]);
  const behaviours = new Set(world.behaviours);
  return {
    env: SIM_KIND,
    jsonSchema: () => z.toJSONSchema(SimHarness, { io: 'input', unrepresentable: 'any' }),
    mayChange: SIM_MAY_CHANGE,
    fields: SIM_FIELDS,
    envFacts: {
      behaviours: world.behaviours,
      contractBehaviours: world.contractBehaviours,
      finish: FINISH,
      note: 'SIMULATED environment: a task succeeds when the agent performs the behaviours its kind requires, then finishes.',
    },
    check(raw) {
      const checked = zodCheck(SimHarness, raw);
      if (!checked.ok) return checked;
      const spec = checked.spec;
      const unknown = [
        ...spec.hints.filter((b) => !actions.has(b)).map((b) => `hints: unknown behaviour '${b}'`),
        ...spec.avoid.filter((b) => !actions.has(b)).map((b) => `avoid: unknown behaviour '${b}'`),
        ...spec.scaffold.performs.filter((b) => !behaviours.has(b)).map((b) => `scaffold.performs: unknown behaviour '${b}'`),
      ];
      if (unknown.length > 0)
        return {
          ok: false,
          error: `${unknown.map((u) => `  - ${u}`).join('\n')}\n  (the world's behaviours: ${world.behaviours.join(', ')})`,
        };
      return { ok: true, spec: spec as unknown as Record<string, unknown> };
    },
    harness: (spec) => simHarness(spec as unknown as SimHarness),
    directionProblem(direction, spec, parent) {
      const contract = new Set(world.contractBehaviours);
      if (contract.size === 0) return null;
      const added = (field: 'hints' | 'performs') => {
        const of = (h: Record<string, unknown>) =>
          (field === 'hints' ? (h as unknown as SimHarness).hints : (h as unknown as SimHarness).scaffold.performs) ?? [];
        const before = new Set(of(parent));
        return of(spec).filter((b) => !before.has(b));
      };
      const outside = (list: string[], wantContract: boolean) => list.filter((b) => b !== FINISH && contract.has(b) !== wantContract);
      const contractList = world.contractBehaviours.join(', ');
      if (direction === 'environment_contract') {
        const wrong = [...outside(added('hints'), true), ...outside(added('performs'), true)];
        return wrong.length
          ? `environment_contract adds only behaviours that consult the environment (${contractList}); ${wrong.join(', ')} is procedure`
          : null;
      }
      if (direction === 'procedural_skill' || direction === 'trajectory_regulation') {
        const wrong = outside(added('hints'), false);
        return wrong.length
          ? `${direction} hints procedure, not what consults the environment (${wrong.join(', ')}: environment_contract)`
          : null;
      }
      return null;
    },
  };
}
