/**
 * A Harness driven by a declarative spec: the runtime's hooks, filled from
 * the spec's context, turn hints, action handling, observation shaping and
 * budget. The env's protocol (its system prompt, its parser) stays the env's.
 */
import type { Harness, TurnContext } from './harness';
import type { LoadedSpec, TextRepair } from './spec';

export const TRUNCATION_MARK = '[TRUNCATED]';

const ACTION_LINE = /^\s*Action:/im;
const SQL_BLOCK = /```sql\s*\n[\s\S]*?```/i;
const BARE_SQL = /^\s*(SELECT|INSERT|UPDATE|DELETE|WITH|SHOW|DESCRIBE)\b[\s\S]*$/i;

const repairs: Record<TextRepair, (text: string) => string | null> = {
  add_missing_operation_line: (text) => (!ACTION_LINE.test(text) && SQL_BLOCK.test(text) ? `Action: Operation\n${text}` : null),
  add_missing_answer_line: (text) => (!ACTION_LINE.test(text) && /Final Answer:/i.test(text) ? `Action: Answer\n${text}` : null),
  wrap_bare_sql: (text) =>
    !ACTION_LINE.test(text) && !text.includes('```') && BARE_SQL.test(text) ? `Action: Operation\n\`\`\`sql\n${text.trim()}\n\`\`\`` : null,
  tool_call_from_text: toolCallFromText,
  wrap_bare_python: (text) => (!text.includes('```') && /\bapis\.\w+\.\w+\(/.test(text) ? `\`\`\`python\n${text.trim()}\n\`\`\`` : null),
  keep_last_action: (text) => {
    const starts = [...text.matchAll(/^\s*Action:/gim)].map((m) => m.index ?? 0);
    return starts.length > 1 ? text.slice(starts[starts.length - 1]).trimStart() : null;
  },
};

/** The first tool call written as text, as the action text a function call would have made (`{"tool", "arguments"}`). */
function toolCallFromText(text: string): string | null {
  if (/^\s*\{\s*"tool"\s*:/.test(text)) return null;
  const candidates = [
    ...[...text.matchAll(/<tool_call>\s*([\s\S]*?)\s*<\/tool_call>/g)].map((m) => m[1]),
    ...[...text.matchAll(/```(?:json)?\s*\n([\s\S]*?)```/g)].map((m) => m[1]),
    text.trim(),
  ];
  for (const candidate of candidates) {
    try {
      const call = JSON.parse(candidate) as { name?: unknown; tool?: unknown; arguments?: unknown; parameters?: unknown };
      const name = call.name ?? call.tool;
      if (typeof name !== 'string') continue;
      let args = call.arguments ?? call.parameters ?? {};
      if (typeof args === 'string') args = JSON.parse(args);
      return JSON.stringify({ tool: name, arguments: args });
    } catch {
      // not a call
    }
  }
  return null;
}

export function applyRepairs(text: string, names: readonly TextRepair[]): { text: string; repaired: boolean } {
  let current = text;
  let repaired = false;
  for (const name of names) {
    const next = repairs[name](current);
    if (next !== null) {
      current = next;
      repaired = true;
    }
  }
  return { text: current, repaired };
}

export function truncate(text: string, maxChars: number): string {
  return text.length > maxChars ? `${text.slice(0, maxChars)}${TRUNCATION_MARK}` : text;
}

/** `envSystemPrompt`: the env protocol's own system prompt ('' when the env has none). */
export function specHarness(loaded: LoadedSpec, envSystemPrompt: string): Harness {
  const { spec, version } = loaded;
  const systemPrompt = [spec.context.systemPrompt ?? envSystemPrompt, ...spec.context.append]
    .filter((part) => part.length > 0)
    .join('\n\n');
  const rejections = spec.actions.reject.map((r) => ({ pattern: new RegExp(r.pattern, r.flags), feedback: r.feedback }));
  const annotations = spec.observations.annotate.map((a) => ({ match: new RegExp(a.match, a.flags), note: a.note }));
  const guard = spec.budget.finishGuard && {
    finish: new RegExp(spec.budget.finishGuard.finishPattern, 'i'),
    requireBefore: new RegExp(spec.budget.finishGuard.requireBefore, 'i'),
    feedback: spec.budget.finishGuard.feedback,
  };

  return {
    id: spec.id,
    parent: spec.parent,
    direction: spec.direction,
    description: spec.description,
    version,
    systemPrompt: () => systemPrompt,
    scaffoldActions: () => [],
    realizeAction(text: string, context: TurnContext) {
      const { text: action, repaired } = applyRepairs(text, spec.actions.repairs);
      for (const rejection of rejections) {
        if (rejection.pattern.test(action)) return { ok: false, retry: true, error: rejection.feedback };
      }
      if (guard && guard.finish.test(action) && !context.previousActions.some((a) => guard.requireBefore.test(a))) {
        return { ok: false, retry: true, error: guard.feedback };
      }
      return { ok: true, action, repaired };
    },
    shapeObservation(observation: string, context: TurnContext) {
      let shaped = spec.observations.maxChars ? truncate(observation, spec.observations.maxChars) : observation;
      for (const annotation of annotations) if (annotation.match.test(observation)) shaped += `\n${annotation.note}`;
      for (const hint of spec.turnHints) {
        const applies =
          hint.when === 'every_turn' ||
          (hint.when === 'after_error' && context.lastObservationKind === 'error') ||
          (hint.when === 'after_empty_result' && context.lastObservationKind === 'empty') ||
          (hint.when === 'last_turn' && context.turn === context.budget - 1);
        if (applies) shaped += `\n${hint.text}`;
      }
      return shaped;
    },
    turnBudget: (maxTurns) => (spec.budget.maxTurns ?? maxTurns) + spec.budget.extraTurns,
  };
}
