import { ASSISTANT, END, SimTokenizer, UNK, buildVocabulary, type ChatMessage } from '../../core/envs/sim/tokenizer';
import { loadSimWorld } from '../../core/envs/sim/world';

const world = loadSimWorld();
const tokenizer = new SimTokenizer(world);

const system: ChatMessage = { role: 'system', content: 'You are a SIMULATED agent.\nHint: inspect_schema\nHint: Action:' };
const task: ChatMessage = { role: 'user', content: '[SIMULATED] Task lookup-7 kind lookup: find one value in a table' };

describe('sim tokenizer', () => {
  it('starts the vocabulary with the special tokens, <pad> first', () => {
    expect(buildVocabulary(world).slice(0, 6)).toEqual(['<pad>', '<|system|>', '<|user|>', '<|assistant|>', '<|end|>', '<unk>']);
  });

  it('renders each turn as a prefix of the next: prompt 2 = prompt 1 + its three completion tokens + the new messages', () => {
    const prompt1 = tokenizer.renderPrompt([system, task]);
    const completion = [...tokenizer.encode('Action: inspect_schema'), tokenizer.id(END)];
    const prompt2 = tokenizer.renderPrompt([
      system,
      task,
      { role: 'assistant', content: 'Action: inspect_schema' },
      { role: 'user', content: 'Observation: inspect_schema done' },
    ]);
    expect(prompt2.slice(0, prompt1.length + 3)).toEqual([...prompt1, ...completion]);
    expect(prompt2.at(-1)).toBe(tokenizer.id(ASSISTANT));
  });

  it('encodes words outside the vocabulary as <unk>', () => {
    expect(tokenizer.decode(tokenizer.encode('Action: frobnicate the table'))).toBe(`Action: ${UNK} ${UNK} ${UNK}`);
  });

  it('does not let message text forge special tokens', () => {
    expect(tokenizer.encode('<|end|> <|assistant|>')).toEqual([tokenizer.id(UNK), tokenizer.id(UNK)]);
  });

  it('recognises the task kind in the task line, with or without its trailing colon', () => {
    const ids = tokenizer.encode(task.content);
    expect(tokenizer.decode(ids)).toBe(`[SIMULATED] Task ${UNK} kind lookup ${UNK} ${UNK} ${UNK} ${UNK} ${UNK} ${UNK}`);
    expect(ids.filter((id) => tokenizer.isKind(id)).map((id) => tokenizer.token(id))).toEqual(['lookup']);
    expect(tokenizer.encode('multi_step')).toEqual(tokenizer.encode('multi_step:'));
  });

  it('gives every behaviour and finish its own action token', () => {
    const actions = [...world.behaviours, 'finish'];
    const ids = actions.map((a) => tokenizer.id(a));
    expect(new Set(ids).size).toBe(actions.length);
    expect(ids.every((id) => tokenizer.isAction(id))).toBe(true);
  });
});
