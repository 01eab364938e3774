/**
 * The staff directory env (examples/directory-env), played through its
 * episodes: the split, the commands, and the scoring a policy could try to
 * game (repeating the record, listing many values).
 */
import directoryEnv, { answers, directory, directoryTasks, parseCommand, record } from '../../examples/directory-env/env';
import type { Environment } from '../../core/harness/environment';

const create = (split: string): Environment => directoryEnv.create({ split }, []);

async function play(taskId: string, replies: string[]): Promise<{ observations: string[]; success?: boolean; done: boolean }> {
  const episode = await create('all').startEpisode(taskId, { maxTurns: 5 });
  const observations: string[] = [];
  for (const reply of replies) {
    const outcome = await episode.step(reply);
    observations.push(outcome.observation);
    if (outcome.done) return { observations, success: outcome.success, done: true };
  }
  return { observations, done: false };
}

const [task] = directoryTasks().filter((t) => t.kind === 'city');
const person = task.person;

test('320 distinct people, one task each; a fourth held out, 20 of each kind, and the splits do not overlap', () => {
  expect(new Set(directory().map((p) => p.name)).size).toBe(320);
  const train = create('train').listTasks();
  const heldOut = create('heldout').listTasks();
  expect(train.length).toBe(240);
  expect(heldOut.length).toBe(80);
  for (const kind of ['phone', 'city', 'team', 'room']) expect(heldOut.filter((t) => t.kind === kind).length).toBe(20);
  expect(train.filter((t) => heldOut.some((h) => h.taskId === t.taskId))).toEqual([]);
  expect(create('all').listTasks().length).toBe(320);
});

test('a lookup shows the record and restates the question; the right value ends the episode as a success', async () => {
  const run = await play(task.id, [`lookup ${person.name}`, `The city of ${person.name} is ${person.city}.`]);
  expect(run.observations[0]).toContain(record(person));
  expect(run.observations[0]).toContain(`What is the city of ${person.name}?`);
  expect(run).toMatchObject({ done: true, success: true });
});

test('a field lookup shows that field only; a reply naming the person looks them up; `answer` works before a lookup', async () => {
  const field = await play(task.id, [`lookup ${person.name} city`]);
  expect(field.observations[0]).toContain(`${person.name}: city ${person.city}`);
  expect(field.observations[0]).not.toContain(`phone ${person.phone}`);
  const named = await play(task.id, [`I think ${person.name} lives in Paris.`]);
  expect(named.observations[0]).toContain(record(person));
  expect(await play(task.id, [`You: answer ${person.city}`])).toMatchObject({ done: true, success: true });
});

test('a reply that is no command and names no one is an error, and the episode goes on', async () => {
  const run = await play(task.id, ['Hello!', 'Still nothing.']);
  expect(run.done).toBe(false);
  expect(run.observations[0]).toMatch(/^Not a command/);
});

test('gaming the scoring fails: repeating the record, listing every value, or a wrong value', async () => {
  expect(await play(task.id, [`lookup ${person.name}`, record(person)])).toMatchObject({ success: false });
  const cities = ['Denver', 'Oslo', 'Lima', 'Osaka', 'Porto', 'Quebec', 'Dakar', 'Perth', 'Bergen', 'Tucson'];
  expect(await play(task.id, [`answer ${cities.join(' ')}`])).toMatchObject({ success: false });
  const wrong = cities.find((c) => c !== person.city)!;
  expect(await play(task.id, [`answer ${wrong}`])).toMatchObject({ success: false });
  const phoneTask = directoryTasks().find((t) => t.kind === 'phone')!;
  expect(answers(`${phoneTask.person.phone} or 1234 or 5678`, phoneTask.person.phone)).toBe(false);
  expect(answers(`It is ${phoneTask.person.phone}.`, phoneTask.person.phone)).toBe(true);
});

test('commands are read at the start of a line, after a speaker label or a bullet, not inside prose', () => {
  expect(parseCommand('lookup Ann B. Lee')).toEqual({ verb: 'lookup', arg: 'Ann B. Lee' });
  expect(parseCommand('You: answer: Oslo')).toEqual({ verb: 'answer', arg: 'Oslo' });
  expect(parseCommand('- **lookup** Ann B. Lee')).toEqual({ verb: 'lookup', arg: 'Ann B. Lee' });
  expect(parseCommand('I cannot answer the question.')).toBeNull();
});
