import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CharsetEnvironment, CharsetTaskFileError, charsetShare, loadCharsetTasks } from '../../core/envs/charset/environment';
import { parseRunConfig } from '../../core/config';

const DIGITS = '0123456789';

test('a reply scores the share of its non-blank characters in the set: partial credit from 0 to 1', () => {
  expect(charsetShare('2024', DIGITS)).toBe(1);
  expect(charsetShare('year 2024', DIGITS)).toBe(0.5);
  expect(charsetShare(' 1 a ', DIGITS)).toBe(0.5);
  expect(charsetShare('   ', DIGITS)).toBe(0);
  expect(charsetShare('\ufffd\ufffd9', DIGITS)).toBeCloseTo(1 / 3, 12);
});

test('an episode has one turn: mostly digits succeeds, a partial reply is a wrong answer with its share as reward, a blank one a format error', async () => {
  const env = CharsetEnvironment.fromFile();
  const [task] = env.listTasks();
  const run = async (reply: string) => (await env.startEpisode(task.taskId)).step(reply);
  expect(await run('4821')).toMatchObject({ done: true, success: true, reward: 1, failureType: null });
  expect(await run('ab12x')).toMatchObject({ done: true, success: false, reward: 0.4, failureType: 'wrong_answer' });
  expect(await run('  ')).toMatchObject({ done: true, success: false, reward: 0, failureType: 'format_error' });
  const episode = await env.startEpisode(task.taskId);
  await episode.step('1');
  await expect(episode.step('2')).rejects.toThrow(/one turn/);
});

test('the shipped tasks: three kinds of ten, a base harness first, siblings along repair directions', () => {
  const env = CharsetEnvironment.fromFile();
  const kinds = new Set(env.listTasks().map((t) => t.kind));
  expect([...kinds].sort()).toEqual(['code', 'number', 'year']);
  expect(env.listTasks()).toHaveLength(30);
  expect(env.harnesses().map((h) => [h.id, h.direction])).toEqual([
    ['base', 'base'],
    ['ec-charset', 'environment_contract'],
    ['ps-examples', 'procedural_skill'],
    ['tr-short', 'trajectory_regulation'],
  ]);
  expect(env.harnesses()[0].systemPrompt(env.listTasks()[0])).toBe('');
});

test('a task file naming a charset it does not define is refused with the path of the field', () => {
  const file = path.join(mkdtempSync(path.join(os.tmpdir(), 'charset-')), 'tasks.json');
  writeFileSync(
    file,
    JSON.stringify({
      name: 'x',
      charsets: { digits: '0123' },
      successShare: 0.5,
      kinds: [{ name: 'a', charset: 'letters', instructions: ['go'] }],
    }),
  );
  expect(() => loadCharsetTasks(file)).toThrow(CharsetTaskFileError);
  expect(() => loadCharsetTasks(file)).toThrow(/kinds\.0\.charset: 'letters' is not one of charsets \(digits\)/);
});

test('the real-CPU example config is a valid run config on the charset env', () => {
  const example = JSON.parse(readFileSync(path.join(__dirname, '..', '..', 'examples', 'real-cpu.json'), 'utf8')) as { config: unknown };
  const config = parseRunConfig(example.config);
  expect(config).toMatchObject({ env: { kind: 'charset' }, policy: { model: 'tiny-qwen3' }, rollout: { maxTurns: 1, maxTokens: 8 } });
});
