/**
 * The SIMULATED policy's tokenizer and chat template.
 *
 * Word-level and built from the world, so every word the sim protocol uses is
 * one token and the policy can read task kind, hints and past behaviours
 * straight off token ids. Text is split on whitespace; a word is its own token
 * when it is in the vocabulary, and `<unk>` otherwise. One exception keeps the
 * task line readable: a kind name followed by `:` (the `lookup:` of
 * `[SIMULATED] Task t1 kind lookup: find ...`) is the kind's token.
 *
 * Special tokens are only ever produced by the chat template: the literal text
 * `<|end|>` inside a message is `<unk>`, so message content cannot forge turn
 * structure.
 */
import type { SimWorld } from './world';
import { FINISH } from './world';

export const PAD = '<pad>';
export const SYSTEM = '<|system|>';
export const USER = '<|user|>';
export const ASSISTANT = '<|assistant|>';
export const END = '<|end|>';
export const UNK = '<unk>';
export const SPECIAL_TOKENS = [PAD, SYSTEM, USER, ASSISTANT, END, UNK] as const;

export const ACTION = 'Action:';
export const MAYBE = 'Maybe:';
export const HINT = 'Hint:';
export const AVOID = 'Avoid:';
export const OBSERVATION = 'Observation:';
/** The fixed words of the sim text protocol (see the harness runtime). */
export const PROTOCOL_WORDS = [
  ACTION,
  MAYBE,
  HINT,
  AVOID,
  OBSERVATION,
  '[SIMULATED]',
  'Task',
  'kind',
  'done',
  'by',
  'harness',
  'already',
  'format',
  'error',
] as const;

export type ChatRole = 'system' | 'user' | 'assistant';
export interface ChatMessage {
  role: ChatRole;
  content: string;
}

const ROLE_TOKENS: Record<ChatRole, string> = { system: SYSTEM, user: USER, assistant: ASSISTANT };

/**
 * The token list, in id order: specials (`<pad>` = 0), protocol words, kind
 * names, behaviours, `finish`. A word already listed keeps its first id, so a
 * kind named like a behaviour shares one token with it.
 */
export function buildVocabulary(world: SimWorld): string[] {
  const words = [...SPECIAL_TOKENS, ...PROTOCOL_WORDS, ...world.kinds.map((k) => k.name), ...world.behaviours, FINISH];
  return [...new Set(words)];
}

export class SimTokenizer {
  readonly vocabulary: readonly string[];
  /** Kind names, in world order. */
  readonly kinds: readonly string[];
  /** Behaviours then `finish`: everything the policy can choose as an action. */
  readonly actions: readonly string[];
  private readonly idByWord: Map<string, number>;
  private readonly kindIds: Set<number>;
  private readonly actionIds: Set<number>;

  constructor(world: SimWorld) {
    this.vocabulary = buildVocabulary(world);
    this.idByWord = new Map(this.vocabulary.map((word, id) => [word, id]));
    this.kinds = world.kinds.map((k) => k.name);
    this.actions = [...world.behaviours, FINISH];
    this.kindIds = new Set(this.kinds.map((k) => this.id(k)));
    this.actionIds = new Set(this.actions.map((a) => this.id(a)));
  }

  get size(): number {
    return this.vocabulary.length;
  }

  /** The id of a vocabulary word; throws for a word outside the vocabulary (a programming error). */
  id(word: string): number {
    const id = this.idByWord.get(word);
    if (id === undefined) throw new Error(`'${word}' is not in the sim vocabulary`);
    return id;
  }

  /** The word of a token id; throws for an id outside the vocabulary. */
  token(id: number): string {
    const word = this.vocabulary[id];
    if (word === undefined) throw new Error(`token id ${id} is outside the sim vocabulary (size ${this.size})`);
    return word;
  }

  isValidId(id: number): boolean {
    return Number.isInteger(id) && id >= 0 && id < this.size;
  }

  isKind(id: number): boolean {
    return this.kindIds.has(id);
  }

  /** True for a behaviour or `finish` token. */
  isAction(id: number): boolean {
    return this.actionIds.has(id);
  }

  encode(text: string): number[] {
    return text
      .split(/\s+/)
      .filter((word) => word.length > 0)
      .map((word) => this.encodeWord(word));
  }

  /** Space-joined words; special tokens are rendered as their text. */
  decode(ids: readonly number[]): string {
    return ids.map((id) => this.token(id)).join(' ');
  }

  /**
   * The chat template: `<|role|> content <|end|>` per message, then
   * `<|assistant|>` as the generation prompt. Because every message renders
   * on its own, the prompt of a later turn starts with the prompt of an
   * earlier turn followed by that turn's completion tokens.
   */
  renderPrompt(messages: readonly ChatMessage[]): number[] {
    const ids: number[] = [];
    for (const message of messages) {
      ids.push(this.id(ROLE_TOKENS[message.role]), ...this.encode(message.content), this.id(END));
    }
    ids.push(this.id(ASSISTANT));
    return ids;
  }

  private encodeWord(word: string): number {
    if (!(SPECIAL_TOKENS as readonly string[]).includes(word)) {
      const id = this.idByWord.get(word);
      if (id !== undefined) return id;
      if (word.endsWith(':')) {
        const stem = word.slice(0, -1);
        if (this.kinds.includes(stem)) return this.id(stem);
      }
    }
    return this.id(UNK);
  }
}
