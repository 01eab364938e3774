/**
 * The sim harness pool: each SimHarness of the world file becomes a Harness.
 * Prompted effects are lines of the system prompt the sim policy reads; scaffolded
 * effects are work the harness does itself, outside the policy's tokens.
 */
import type { ActionRealization, Harness } from '../../harness/harness';
import type { SimHarness } from './world';
import { contentHash } from '../../harness/frozen-pool';

const ACTION = /^\s*Action:\s*(\S+)\s*$/;
const MALFORMED = /^\s*Maybe:\s*(\S+)\s*$/;

export function simHarness(spec: SimHarness): Harness {
  const promptLines = [
    'You are an agent in a SIMULATED environment. Reply with exactly one line: Action: <behaviour>.',
    'Reply "Action: finish" when the task is done.',
    ...(spec.formatHint ? ['Hint: Action:'] : []),
    ...spec.hints.map((b) => `Hint: ${b}`),
    ...spec.avoid.map((b) => `Avoid: ${b}`),
  ];
  const systemPrompt = promptLines.join('\n');
  return {
    id: spec.id,
    parent: spec.parent,
    direction: spec.direction,
    description: spec.description,
    version: contentHash(spec),
    systemPrompt: () => systemPrompt,
    scaffoldActions: () => [...spec.scaffold.performs],
    realizeAction(text: string): ActionRealization {
      const action = ACTION.exec(text);
      if (action) return { ok: true, action: action[1], repaired: false };
      const malformed = MALFORMED.exec(text);
      if (malformed && spec.scaffold.repairFormat) return { ok: true, action: malformed[1], repaired: true };
      return { ok: false, retry: false, error: `expected "Action: <behaviour>", got ${JSON.stringify(text.slice(0, 80))}` };
    },
    shapeObservation: (observation) => observation,
    turnBudget: (maxTurns) => maxTurns + spec.extraTurns,
  };
}
