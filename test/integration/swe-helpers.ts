/**
 * A scripted SWE agent for tests: it looks around, makes the gold patch's
 * changes with the editor (one str_replace per hunk, create for new files),
 * runs the tests and submits, every step a function call through the tools API.
 */
import type { SweInstance } from '../../core/envs/swe/instances';
import type { ScriptedMessage, ScriptedReply } from './scripted-policy-server';

type Call = { name: string; arguments: Record<string, unknown> };

/** The editor calls that turn the tree into the gold patch's result. */
export function goldEditCalls(patch: string): Call[] {
  const calls: Call[] = [];
  for (const file of patch.split(/^diff --git /m).slice(1)) {
    const target = /^\+\+\+ b\/(.+)$/m.exec(file)?.[1];
    if (!target) continue;
    const path = `/workspace/${target}`;
    const created = /^--- \/dev\/null$/m.test(file);
    const hunks = file.split(/^@@[^\n]*@@[^\n]*\n/m).slice(1);
    if (created) {
      const text = hunks
        .flatMap((h) =>
          h
            .split('\n')
            .filter((l) => l.startsWith('+'))
            .map((l) => l.slice(1)),
        )
        .join('\n');
      calls.push({ name: 'str_replace_editor', arguments: { command: 'create', path, file_text: `${text}\n` } });
      continue;
    }
    for (const hunk of hunks) {
      const lines = hunk.split('\n').filter((l) => !l.startsWith('\\'));
      while (lines.length && lines[lines.length - 1] === '') lines.pop();
      const before = lines.filter((l) => l.startsWith(' ') || l.startsWith('-')).map((l) => l.slice(1));
      const after = lines.filter((l) => l.startsWith(' ') || l.startsWith('+')).map((l) => l.slice(1));
      calls.push({
        name: 'str_replace_editor',
        arguments: { command: 'str_replace', path, old_str: before.join('\n'), new_str: after.join('\n') },
      });
    }
  }
  return calls;
}

/** The whole scripted episode: look, edit, test, submit. */
export function goldAgentCalls(instance: SweInstance): Call[] {
  const files = instance.harness_s?.test_files ?? [];
  return [
    { name: 'execute_bash', arguments: { command: 'git status --short && ls' } },
    ...goldEditCalls(instance.patch),
    { name: 'execute_bash', arguments: { command: `python -m pytest -q -p no:cacheprovider ${files.join(' ')} | tail -3` } },
    { name: 'submit', arguments: {} },
  ];
}

/** The policy's own turns so far. */
export const agentTurns = (messages: ScriptedMessage[]) => messages.filter((m) => m.role === 'assistant').length;

/** The instance a prompt is about (its problem statement is in the first user message). */
export function instanceOf(instances: readonly SweInstance[], messages: ScriptedMessage[]): SweInstance {
  const task = messages.find((m) => m.role === 'user')?.content ?? '';
  const instance = instances.find((i) => task.includes(i.problem_statement.trim()));
  if (!instance) throw new Error('scripted SWE agent: no instance in the prompt');
  return instance;
}

/** A reply of the gold agent at this point of the episode. */
export function goldAgentReply(instances: readonly SweInstance[], messages: ScriptedMessage[]): ScriptedReply {
  const calls = goldAgentCalls(instanceOf(instances, messages));
  const call = calls[Math.min(agentTurns(messages), calls.length - 1)];
  return { calls: [call] };
}
