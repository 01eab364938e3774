/**
 * AgentBench v0.2's DBBench protocol, as the base harness speaks it: the
 * instruction AgentBench sends, the first user message it builds from a task,
 * how it reads one assistant message, and the text of its observations
 * (Python's `str()` of the rows mysql-connector fetched, cut at 800 characters).
 *
 * The protocol is Python's, so this file carries a small model of Python
 * values: `repr` of what the MySQL driver returns, and a literal reader for
 * `eval(final_answer)`, the way AgentBench scores query answers.
 */

/** The instruction AgentBench v0.2 sends (as its first user turn, answered by "Ok."), verbatim. */
export const AGENTBENCH_SYSTEM_PROMPT = `
I will ask you a question, then you should help me operate a MySQL database with SQL to answer the question.
You have to explain the problem and your solution to me and write down your thoughts.
After thinking and explaining thoroughly, every round you can choose to operate or to answer.
your operation should be like this:
Action: Operation
\`\`\`sql
SELECT * FROM table WHERE condition;
\`\`\`
You MUST put SQL in markdown format without any other comments. Your SQL should be in one line.
Every time you can only execute one SQL statement. I will only execute the statement in the first SQL code block. Every time you write a SQL, I will execute it for you and give you the output.
If you are done operating, and you want to commit your final answer, then write down:
Action: Answer
Final Answer: ["ANSWER1", "ANSWER2", ...]
DO NOT write this pattern unless you are sure about your answer. I expect an accurate and correct answer.
Your answer should be accurate. Your answer must be exactly the same as the correct answer.
If the question is about modifying the database, then after done operation, your answer field can be anything.
If your response cannot match any pattern I mentioned earlier, you will be judged as FAIL immediately.
Your input will be raw MySQL response, you have to deal with it by yourself.
`;

/** The agent turn AgentBench injects after its instruction. */
export const AGENTBENCH_PROMPT_ACK = 'Ok.';

/** AgentBench's `max_round` for DBBench (configs/tasks/dbbench.yaml): SQL operations executed per episode. */
export const AGENTBENCH_MAX_ROUNDS = 15;

/**
 * Assistant turns an episode of `maxRounds` rounds allows: every round's
 * operation, then one more reply that may only give the final answer.
 */
export function agentBenchTurnBudget(maxRounds: number = AGENTBENCH_MAX_ROUNDS): number {
  return maxRounds + 1;
}

export const OBSERVATION_MAX_CHARS = 800;
export const TRUNCATION_MARK = '[TRUNCATED]';

/** The first user message of an episode: the question, a newline, the table description. */
export function agentBenchTaskPrompt(task: { description: string; add_description: string }): string {
  return `${task.description}\n${task.add_description}`;
}

/** The whole opening as AgentBench sends it: instruction, "Ok.", the task. */
export function agentBenchOpening(task: { description: string; add_description: string }) {
  return [
    { role: 'user' as const, content: AGENTBENCH_SYSTEM_PROMPT },
    { role: 'assistant' as const, content: AGENTBENCH_PROMPT_ACK },
    { role: 'user' as const, content: agentBenchTaskPrompt(task) },
  ];
}

// ---------------------------------------------------------------------------
// Reading one assistant message

export type DbBenchAction =
  /** `Action: Operation` and the first ```sql block (newlines turned to spaces, as AgentBench does). */
  | { kind: 'sql'; sql: string }
  /** A `Final Answer:` line; `raw` is the rest of that line exactly as AgentBench stores it. */
  | { kind: 'answer'; raw: string }
  | { kind: 'invalid'; reason: string };

// Python's `.` matches everything but \n (JS's also stops at \r, \u2028, \u2029), hence [^\n].
const ACTION_LINE = /Action: ([^\n]*?)\n/;
const SQL_BLOCK = /```sql\n([\s\S]*?)\n```/;
const FINAL_ANSWER = /\nFinal Answer:([^\n]*)/;

/**
 * One assistant message, read as AgentBench v0.2 reads it. The first
 * `Action: X` line decides: exactly `Operation` means SQL, and then a missing
 * ```sql block is a format error; anything else (another action, or no action
 * line at all) is taken as an answer when a line `Final Answer:` follows a
 * newline, else a format error. AgentBench ends the episode on a format error.
 */
export function parseAgentBenchAction(text: string): DbBenchAction {
  const action = ACTION_LINE.exec(text);
  if (action && action[1] === 'Operation') {
    const block = SQL_BLOCK.exec(text);
    if (!block) return { kind: 'invalid', reason: 'Action: Operation without a ```sql code block' };
    return { kind: 'sql', sql: pythonStrip(block[1]).replace(/\n/g, ' ') };
  }
  const answer = parseFinalAnswer(text);
  if (answer !== null) return { kind: 'answer', raw: answer };
  return {
    kind: 'invalid',
    reason: action ? `Action: ${action[1]} is neither Operation nor followed by a Final Answer line` : 'no "Action:" line and no "Final Answer:" line',
  };
}

/** The `Final Answer:` line's rest, or null. At the turn limit AgentBench looks for this only. */
export function parseFinalAnswer(text: string): string | null {
  const match = FINAL_ANSWER.exec(text);
  return match ? match[1] : null;
}

// ---------------------------------------------------------------------------
// Python values

export type PyValue =
  | { type: 'none' }
  | { type: 'bool'; value: boolean }
  | { type: 'int'; value: bigint }
  | { type: 'float'; value: number }
  | { type: 'str'; value: string }
  | { type: 'bytes'; value: Uint8Array }
  | { type: 'list' | 'tuple' | 'set'; items: PyValue[] }
  | { type: 'dict'; entries: Array<[PyValue, PyValue]> }
  /** A value only ever printed (Decimal, datetime...): its repr and its str. */
  | { type: 'object'; repr: string; str: string };

export const py = {
  none: { type: 'none' } as PyValue,
  str: (value: string): PyValue => ({ type: 'str', value }),
  int: (value: bigint | number): PyValue => ({ type: 'int', value: BigInt(value) }),
  float: (value: number): PyValue => ({ type: 'float', value }),
  tuple: (items: PyValue[]): PyValue => ({ type: 'tuple', items }),
  list: (items: PyValue[]): PyValue => ({ type: 'list', items }),
};

// Python's str.isspace() set; str.strip() removes these (JS trim() differs at the edges).
const PY_SPACE = '\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

export function pythonStrip(text: string, chars: string = PY_SPACE): string {
  let start = 0;
  let end = text.length;
  while (start < end && chars.includes(text[start])) start += 1;
  while (end > start && chars.includes(text[end - 1])) end -= 1;
  return text.slice(start, end);
}

/** Python's len(): code points, not UTF-16 units. */
export function pythonLength(text: string): number {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

const NOT_PRINTABLE = /^[\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}\p{Zs}]$/u;

function hex(code: number, width: number): string {
  return code.toString(16).padStart(width, '0');
}

/** repr() of a str: quote choice, escapes and printability as CPython decides them. */
export function pyStrRepr(value: string): string {
  const quote = value.includes("'") && !value.includes('"') ? '"' : "'";
  let out = quote;
  for (const ch of value) {
    const code = ch.codePointAt(0) as number;
    if (ch === quote || ch === '\\') out += `\\${ch}`;
    else if (ch === '\t') out += '\\t';
    else if (ch === '\n') out += '\\n';
    else if (ch === '\r') out += '\\r';
    else if (code < 0x20 || code === 0x7f) out += `\\x${hex(code, 2)}`;
    else if (code < 0x7f) out += ch;
    else if (!NOT_PRINTABLE.test(ch)) out += ch;
    else if (code <= 0xff) out += `\\x${hex(code, 2)}`;
    else if (code <= 0xffff) out += `\\u${hex(code, 4)}`;
    else out += `\\U${hex(code, 8)}`;
  }
  return out + quote;
}

export function pyBytesRepr(value: Uint8Array): string {
  const hasSingle = value.includes(0x27);
  const quote = hasSingle && !value.includes(0x22) ? 0x22 : 0x27;
  let out = `b${String.fromCharCode(quote)}`;
  for (const byte of value) {
    if (byte === quote || byte === 0x5c) out += `\\${String.fromCharCode(byte)}`;
    else if (byte === 0x09) out += '\\t';
    else if (byte === 0x0a) out += '\\n';
    else if (byte === 0x0d) out += '\\r';
    else if (byte < 0x20 || byte >= 0x7f) out += `\\x${hex(byte, 2)}`;
    else out += String.fromCharCode(byte);
  }
  return out + String.fromCharCode(quote);
}

/** repr() of a float: the shortest round-trip digits, fixed notation for exponents -4..15, else 1e+16 style. */
export function pyFloatRepr(value: number): string {
  if (Number.isNaN(value)) return 'nan';
  if (value === Infinity) return 'inf';
  if (value === -Infinity) return '-inf';
  if (value === 0) return Object.is(value, -0) ? '-0.0' : '0.0';
  const [mantissa, exponentText] = value.toExponential().split('e');
  const sign = mantissa.startsWith('-') ? '-' : '';
  const digits = mantissa.replace('-', '').replace('.', '');
  const exponent = Number(exponentText);
  if (exponent >= -4 && exponent < 16) {
    if (exponent < 0) return `${sign}0.${'0'.repeat(-exponent - 1)}${digits}`;
    const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, '0');
    const fraction = digits.slice(exponent + 1);
    return `${sign}${whole}.${fraction || '0'}`;
  }
  const head = digits.length > 1 ? `${digits[0]}.${digits.slice(1)}` : digits;
  const exp = Math.abs(exponent).toString().padStart(2, '0');
  return `${sign}${head}e${exponent < 0 ? '-' : '+'}${exp}`;
}

export function pyRepr(value: PyValue): string {
  switch (value.type) {
    case 'none':
      return 'None';
    case 'bool':
      return value.value ? 'True' : 'False';
    case 'int':
      return value.value.toString();
    case 'float':
      return pyFloatRepr(value.value);
    case 'str':
      return pyStrRepr(value.value);
    case 'bytes':
      return pyBytesRepr(value.value);
    case 'list':
      return `[${value.items.map(pyRepr).join(', ')}]`;
    case 'tuple':
      return value.items.length === 1 ? `(${pyRepr(value.items[0])},)` : `(${value.items.map(pyRepr).join(', ')})`;
    case 'set':
      return value.items.length === 0 ? 'set()' : `{${value.items.map(pyRepr).join(', ')}}`;
    case 'dict':
      return `{${value.entries.map(([k, v]) => `${pyRepr(k)}: ${pyRepr(v)}`).join(', ')}}`;
    case 'object':
      return value.repr;
  }
}

/** str(): the text itself for str, the repr for everything else but printed-only objects. */
export function pyStr(value: PyValue): string {
  if (value.type === 'str') return value.value;
  if (value.type === 'object') return value.str;
  return pyRepr(value);
}

let nanSerial = 0;

/**
 * A key equal for values Python considers equal (1 == 1.0 == True), or null
 * when the value is unhashable (list, dict, set).
 */
export function pyHashKey(value: PyValue): string | null {
  switch (value.type) {
    case 'none':
      return 'N';
    case 'bool':
      return value.value ? 'n:1' : 'n:0';
    case 'int':
      return `n:${value.value.toString()}`;
    case 'float':
      // nan != nan: every nan gets a key of its own.
      if (Number.isNaN(value.value)) return `nan:${(nanSerial += 1)}`;
      if (Number.isInteger(value.value)) return `n:${BigInt(value.value).toString()}`;
      return `f:${pyFloatRepr(value.value)}`;
    case 'str':
      return `s:${value.value}`;
    case 'bytes':
      return `b:${Buffer.from(value.value).toString('hex')}`;
    case 'tuple': {
      const keys = value.items.map(pyHashKey);
      return keys.some((k) => k === null) ? null : `t(${keys.map((k) => JSON.stringify(k)).join(',')})`;
    }
    case 'object':
      return `o:${value.repr}`;
    default:
      return null;
  }
}

/** Python `==`. */
export function pyEquals(a: PyValue, b: PyValue): boolean {
  if ((a.type === 'list' && b.type === 'list') || (a.type === 'tuple' && b.type === 'tuple')) {
    return a.items.length === b.items.length && a.items.every((item, i) => pyEquals(item, b.items[i]));
  }
  if (a.type === 'set' && b.type === 'set') return pySetEquals(a.items, b.items) ?? false;
  if (a.type === 'dict' && b.type === 'dict') {
    return (
      a.entries.length === b.entries.length &&
      a.entries.every(([k, v]) => b.entries.some(([k2, v2]) => pyEquals(k, k2) && pyEquals(v, v2)))
    );
  }
  const ka = pyHashKey(a);
  const kb = pyHashKey(b);
  return ka !== null && ka === kb;
}

/** set(a) == set(b), or null where Python raises TypeError (an unhashable item). */
export function pySetEquals(a: readonly PyValue[], b: readonly PyValue[]): boolean | null {
  const keysA = a.map(pyHashKey);
  const keysB = b.map(pyHashKey);
  if (keysA.some((k) => k === null) || keysB.some((k) => k === null)) return null;
  const setA = new Set(keysA);
  const setB = new Set(keysB);
  return setA.size === setB.size && [...setA].every((k) => setB.has(k));
}

function unicodeDigitsToAscii(text: string): string {
  return text.replace(/\p{Nd}/gu, (ch) => {
    let start = ch.codePointAt(0) as number;
    const code = start;
    while (/\p{Nd}/u.test(String.fromCodePoint(start - 1))) start -= 1;
    return String((code - start) % 10);
  });
}

const FLOAT_TEXT = /^[+-]?(?:(?:\d(?:_?\d)*)?\.\d(?:_?\d)*|\d(?:_?\d)*\.?)(?:[eE][+-]?\d(?:_?\d)*)?$/;
const FLOAT_SPECIAL = /^([+-]?)(inf|infinity|nan)$/i;

/** Python's float(x) for a str, int, float or bool; null where Python raises ValueError or TypeError. */
export function pyFloat(value: PyValue): number | null {
  switch (value.type) {
    case 'float':
      return value.value;
    case 'int':
      return Number(value.value);
    case 'bool':
      return value.value ? 1 : 0;
    case 'str': {
      const text = unicodeDigitsToAscii(pythonStrip(value.value));
      const special = FLOAT_SPECIAL.exec(text);
      if (special) {
        if (special[2].toLowerCase() === 'nan') return NaN;
        return special[1] === '-' ? -Infinity : Infinity;
      }
      return FLOAT_TEXT.test(text) ? Number(text.replace(/_/g, '')) : null;
    }
    default:
      return null;
  }
}

// ---------------------------------------------------------------------------
// eval() of a Python literal

class LiteralSyntaxError extends Error {}

/**
 * Python's `eval(text)` for literal expressions: strings (prefixes r/u/b,
 * escapes, adjacent concatenation), ints, floats, None/True/False, lists,
 * tuples (with or without parentheses), sets, dicts, unary signs. Returns null
 * where eval would raise (a syntax error, an unknown name) or where the text
 * is an expression this reader does not evaluate (arithmetic, calls).
 */
export function parsePythonLiteral(text: string): PyValue | null {
  try {
    const reader = new LiteralReader(text.replace(/^[ \t]+/, ''));
    const value = reader.readTopLevel();
    return value;
  } catch (err) {
    if (err instanceof LiteralSyntaxError) return null;
    throw err;
  }
}

const SIMPLE_ESCAPES: Record<string, string> = {
  '\\': '\\', "'": "'", '"': '"', a: '\x07', b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\n': '',
};

class LiteralReader {
  private pos = 0;
  private depth = 0;
  constructor(private readonly src: string) {}

  readTopLevel(): PyValue {
    const first = this.readExpression();
    this.skipSpace();
    if (this.peek() !== ',') {
      this.expectEnd();
      return first;
    }
    const items = [first];
    while (this.peek() === ',') {
      this.pos += 1;
      this.skipSpace();
      if (this.atEnd()) break;
      items.push(this.readExpression());
      this.skipSpace();
    }
    this.expectEnd();
    return { type: 'tuple', items };
  }

  private expectEnd(): void {
    this.skipSpace();
    if (!this.atEnd()) throw new LiteralSyntaxError(`unexpected ${this.src.slice(this.pos, this.pos + 10)}`);
  }

  private atEnd(): boolean {
    return this.pos >= this.src.length;
  }

  private peek(): string {
    return this.src[this.pos] ?? '';
  }

  private skipSpace(): void {
    for (;;) {
      const ch = this.peek();
      if (ch === ' ' || ch === '\t' || ch === '\f' || (this.depth > 0 && (ch === '\n' || ch === '\r'))) this.pos += 1;
      else if (ch === '\\' && this.src[this.pos + 1] === '\n') this.pos += 2;
      else if (ch === '#') {
        while (!this.atEnd() && this.peek() !== '\n') this.pos += 1;
      } else if ((ch === '\n' || ch === '\r') && this.depth === 0 && /^\s*$/.test(this.src.slice(this.pos))) this.pos = this.src.length;
      else return;
    }
  }

  private readExpression(): PyValue {
    this.skipSpace();
    const ch = this.peek();
    if (ch === '-' || ch === '+') {
      this.pos += 1;
      const operand = this.readExpression();
      if (ch === '+') {
        if (operand.type === 'int' || operand.type === 'float') return operand;
        if (operand.type === 'bool') return { type: 'int', value: operand.value ? 1n : 0n };
        throw new LiteralSyntaxError('unary + on a non-number');
      }
      if (operand.type === 'int') return { type: 'int', value: -operand.value };
      if (operand.type === 'float') return { type: 'float', value: -operand.value };
      if (operand.type === 'bool') return { type: 'int', value: operand.value ? -1n : 0n };
      throw new LiteralSyntaxError('unary - on a non-number');
    }
    if (ch === '[') return { type: 'list', items: this.readSequence(']').items };
    if (ch === '(') {
      const { items, trailingComma } = this.readSequence(')');
      if (items.length === 1 && !trailingComma) return items[0];
      return { type: 'tuple', items };
    }
    if (ch === '{') return this.readBraces();
    if (/[0-9.]/.test(ch)) return this.readNumber();
    const prefix = /^([rRuUbB]|[bB][rR]|[rR][bB])?(['"])/.exec(this.src.slice(this.pos));
    if (prefix) return this.readStrings();
    const name = /^[A-Za-z_][A-Za-z0-9_]*/.exec(this.src.slice(this.pos));
    if (name) {
      this.pos += name[0].length;
      if (name[0] === 'None') return { type: 'none' };
      if (name[0] === 'True') return { type: 'bool', value: true };
      if (name[0] === 'False') return { type: 'bool', value: false };
      throw new LiteralSyntaxError(`name '${name[0]}' is not defined`);
    }
    throw new LiteralSyntaxError(`unexpected ${ch || 'end of input'}`);
  }

  private readSequence(close: string): { items: PyValue[]; trailingComma: boolean } {
    this.pos += 1;
    this.depth += 1;
    const items: PyValue[] = [];
    let trailingComma = false;
    for (;;) {
      this.skipSpace();
      if (this.peek() === close) break;
      items.push(this.readExpression());
      this.skipSpace();
      trailingComma = false;
      if (this.peek() === ',') {
        this.pos += 1;
        trailingComma = true;
        continue;
      }
      if (this.peek() !== close) throw new LiteralSyntaxError(`expected ${close}`);
    }
    this.pos += 1;
    this.depth -= 1;
    return { items, trailingComma };
  }

  private readBraces(): PyValue {
    this.pos += 1;
    this.depth += 1;
    const items: PyValue[] = [];
    const entries: Array<[PyValue, PyValue]> = [];
    let isDict: boolean | null = null;
    for (;;) {
      this.skipSpace();
      if (this.peek() === '}') break;
      const key = this.readExpression();
      this.skipSpace();
      if (this.peek() === ':') {
        if (isDict === false) throw new LiteralSyntaxError('mixed set and dict');
        isDict = true;
        this.pos += 1;
        entries.push([key, this.readExpression()]);
      } else {
        if (isDict === true) throw new LiteralSyntaxError('mixed set and dict');
        isDict = false;
        items.push(key);
      }
      this.skipSpace();
      if (this.peek() === ',') {
        this.pos += 1;
        continue;
      }
      if (this.peek() !== '}') throw new LiteralSyntaxError('expected }');
    }
    this.pos += 1;
    this.depth -= 1;
    if (isDict !== false) {
      const unique: Array<[PyValue, PyValue]> = [];
      for (const [k, v] of entries) {
        const key = pyHashKey(k);
        if (key === null) throw new LiteralSyntaxError('unhashable dict key');
        const existing = unique.findIndex(([k2]) => pyHashKey(k2) === key);
        if (existing >= 0) unique[existing] = [unique[existing][0], v];
        else unique.push([k, v]);
      }
      return { type: 'dict', entries: unique };
    }
    const seen = new Set<string>();
    const unique: PyValue[] = [];
    for (const item of items) {
      const key = pyHashKey(item);
      if (key === null) throw new LiteralSyntaxError('unhashable set item');
      if (!seen.has(key)) {
        seen.add(key);
        unique.push(item);
      }
    }
    return { type: 'set', items: unique };
  }

  private readNumber(): PyValue {
    const rest = this.src.slice(this.pos);
    const radix = /^0([xX](?:_?[0-9a-fA-F])+|[oO](?:_?[0-7])+|[bB](?:_?[01])+)(?![\w.])/.exec(rest);
    if (radix) {
      this.pos += radix[0].length;
      return { type: 'int', value: BigInt(radix[0].replace(/_/g, '').toLowerCase()) };
    }
    const number = /^(?:(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][+-]?\d(?:_?\d)*|\d(?:_?\d)*)/.exec(rest);
    if (!number) throw new LiteralSyntaxError('bad number');
    const after = rest[number[0].length] ?? '';
    if (/[\w.]/.test(after)) throw new LiteralSyntaxError('bad number (complex numbers and suffixes are not literals here)');
    this.pos += number[0].length;
    const clean = number[0].replace(/_/g, '');
    if (/^\d+$/.test(clean)) {
      if (/^0\d/.test(clean) && /[1-9]/.test(clean)) throw new LiteralSyntaxError('leading zeros in a decimal integer');
      return { type: 'int', value: BigInt(clean) };
    }
    return { type: 'float', value: Number(clean) };
  }

  private readStrings(): PyValue {
    let text = '';
    let bytes: boolean | null = null;
    for (;;) {
      this.skipSpace();
      const prefix = /^([rRuUbB]|[bB][rR]|[rR][bB])?(['"])/.exec(this.src.slice(this.pos));
      if (!prefix) break;
      const flags = (prefix[1] ?? '').toLowerCase();
      const isBytes = flags.includes('b');
      if (bytes !== null && bytes !== isBytes) throw new LiteralSyntaxError('cannot mix bytes and str literals');
      bytes = isBytes;
      this.pos += prefix[0].length - 1;
      text += this.readStringBody(flags.includes('r'), isBytes);
    }
    if (bytes) return { type: 'bytes', value: Uint8Array.from(text, (c) => c.charCodeAt(0)) };
    return { type: 'str', value: text };
  }

  private readStringBody(raw: boolean, isBytes: boolean): string {
    const quoteChar = this.peek();
    const triple = this.src.startsWith(quoteChar.repeat(3), this.pos);
    const quote = triple ? quoteChar.repeat(3) : quoteChar;
    this.pos += quote.length;
    let out = '';
    for (;;) {
      if (this.atEnd()) throw new LiteralSyntaxError('unterminated string');
      if (this.src.startsWith(quote, this.pos)) {
        this.pos += quote.length;
        return out;
      }
      const ch = this.src[this.pos];
      if (ch === '\n' && !triple) throw new LiteralSyntaxError('newline in a string');
      if (isBytes && (ch.codePointAt(0) as number) > 0x7f) throw new LiteralSyntaxError('bytes can only contain ASCII');
      if (ch !== '\\') {
        const cp = this.src.codePointAt(this.pos) as number;
        const full = String.fromCodePoint(cp);
        out += full;
        this.pos += full.length;
        continue;
      }
      const next = this.src[this.pos + 1] ?? '';
      if (raw) {
        out += ch + next;
        this.pos += 2;
        continue;
      }
      this.pos += 2;
      if (next in SIMPLE_ESCAPES) out += SIMPLE_ESCAPES[next];
      else if (/[0-7]/.test(next)) {
        const octal = /^[0-7]{1,3}/.exec(this.src.slice(this.pos - 1)) as RegExpExecArray;
        this.pos += octal[0].length - 1;
        out += String.fromCodePoint(parseInt(octal[0], 8));
      } else if (next === 'x') out += this.readHexEscape(2);
      else if (!isBytes && next === 'u') out += this.readHexEscape(4);
      else if (!isBytes && next === 'U') out += this.readHexEscape(8);
      else if (!isBytes && next === 'N') throw new LiteralSyntaxError('\\N{...} escapes are not read here');
      else out += `\\${next}`;
    }
  }

  private readHexEscape(width: number): string {
    const digits = this.src.slice(this.pos, this.pos + width);
    if (!new RegExp(`^[0-9a-fA-F]{${width}}$`).test(digits)) throw new LiteralSyntaxError('truncated escape');
    this.pos += width;
    const code = parseInt(digits, 16);
    if (code > 0x10ffff) throw new LiteralSyntaxError('escape out of range');
    return String.fromCodePoint(code);
  }
}

/** Python's list(x) of an eval'd value; null where list() raises TypeError. */
export function pyList(value: PyValue): PyValue[] | null {
  switch (value.type) {
    case 'list':
    case 'tuple':
    case 'set':
      return [...value.items];
    case 'dict':
      return value.entries.map(([k]) => k);
    case 'str':
      return Array.from(value.value, (ch) => ({ type: 'str', value: ch }) as PyValue);
    case 'bytes':
      return Array.from(value.value, (b) => ({ type: 'int', value: BigInt(b) }) as PyValue);
    default:
      return null;
  }
}

/**
 * The answer list AgentBench v0.2 scores: `list(eval(raw))`, or `[raw]` when
 * that raises. `raw` is the text after "Final Answer:" ('' when there was none).
 */
export function agentBenchAnswerItems(raw: string): PyValue[] {
  const value = parsePythonLiteral(raw);
  const items = value ? pyList(value) : null;
  return items ?? [{ type: 'str', value: raw }];
}

// ---------------------------------------------------------------------------
// Observations

/** AgentBench's cut: over 800 characters (code points), the first 800 and "[TRUNCATED]". */
export function cutObservation(text: string): string {
  if (text.length <= OBSERVATION_MAX_CHARS) return text;
  const codePoints = Array.from(text);
  if (codePoints.length <= OBSERVATION_MAX_CHARS) return text;
  return codePoints.slice(0, OBSERVATION_MAX_CHARS).join('') + TRUNCATION_MARK;
}

/** repr of one fetched row: a tuple. */
export function rowRepr(row: readonly PyValue[]): string {
  return pyRepr({ type: 'tuple', items: [...row] });
}

/** `str(cursor.fetchall())` before the cut: a list of tuples. */
export function rowsText(rows: readonly (readonly PyValue[])[]): string {
  return `[${rows.map(rowRepr).join(', ')}]`;
}

/** The observation after a statement: the fetched rows, or `[]` when it returns none. */
export function rowsObservation(rows: readonly (readonly PyValue[])[]): string {
  return cutObservation(rowsText(rows));
}

/** A server error as mysql-connector's str(error) prints it: `1146 (42S02): Table 'x.y' doesn't exist`. */
export function sqlErrorText(error: { errno?: number | null; sqlState?: string | null; message: string }): string {
  if (error.errno === undefined || error.errno === null || error.errno === -1) return error.message;
  return error.sqlState ? `${error.errno} (${error.sqlState}): ${error.message}` : `${error.errno}: ${error.message}`;
}

export function sqlErrorObservation(error: { errno?: number | null; sqlState?: string | null; message: string }): string {
  return cutObservation(sqlErrorText(error));
}

// ---------------------------------------------------------------------------
// MySQL column values as mysql-connector (C extension) returns them

/** MySQL protocol column type codes (include/mysql_com.h). */
export const MYSQL_TYPES = {
  DECIMAL: 0, TINY: 1, SHORT: 2, LONG: 3, FLOAT: 4, DOUBLE: 5, NULL: 6, TIMESTAMP: 7, LONGLONG: 8, INT24: 9,
  DATE: 10, TIME: 11, DATETIME: 12, YEAR: 13, NEWDATE: 14, VARCHAR: 15, BIT: 16, TIMESTAMP2: 17, DATETIME2: 18,
  TIME2: 19, VECTOR: 242, JSON: 245, NEWDECIMAL: 246, ENUM: 247, SET: 248, TINY_BLOB: 249, MEDIUM_BLOB: 250,
  LONG_BLOB: 251, BLOB: 252, VAR_STRING: 253, STRING: 254, GEOMETRY: 255,
} as const;

const BINARY_CHARSET = 63;

export interface ColumnMeta {
  columnType: number;
  characterSet: number;
}

/** Python's str(Decimal(text)): scientific notation when the exponent is positive or the adjusted exponent < -6. */
export function pyDecimalStr(text: string): string {
  const match = /^([+-]?)(\d*)(?:\.(\d*))?(?:[eE]([+-]?\d+))?$/.exec(text.trim());
  if (!match || (match[2] === '' && (match[3] ?? '') === '')) return text.trim();
  const sign = match[1] === '-' ? '-' : '';
  const fraction = match[3] ?? '';
  let exponent = -fraction.length + Number(match[4] ?? 0);
  const coefficient = (match[2] + fraction).replace(/^0+(?=\d)/, '');
  const adjusted = exponent + coefficient.length - 1;
  if (exponent <= 0 && adjusted >= -6) {
    if (exponent === 0) return sign + coefficient;
    const point = coefficient.length + exponent;
    return point > 0
      ? `${sign}${coefficient.slice(0, point)}.${coefficient.slice(point)}`
      : `${sign}0.${'0'.repeat(-point)}${coefficient}`;
  }
  const head = coefficient.length > 1 ? `${coefficient[0]}.${coefficient.slice(1)}` : coefficient;
  exponent = adjusted;
  return `${sign}${head}E${exponent >= 0 ? '+' : ''}${exponent}`;
}

function dateParts(text: string): number[] | null {
  const match = /^(\d{4})-(\d{2})-(\d{2})(?:[ T](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,6}))?)?$/.exec(text);
  if (!match) return null;
  const parts = match.slice(1, 7).map((p) => Number(p ?? 0));
  parts.push(Number((match[7] ?? '').padEnd(6, '0')));
  return parts;
}

function dateValue(text: string): PyValue {
  const parts = dateParts(text);
  if (!parts || parts[0] === 0 || parts[1] === 0 || parts[2] === 0) return { type: 'none' };
  const [y, m, d] = parts;
  const str = `${String(y).padStart(4, '0')}-${String(m).padStart(2, '0')}-${String(d).padStart(2, '0')}`;
  return { type: 'object', repr: `datetime.date(${y}, ${m}, ${d})`, str };
}

function datetimeValue(text: string): PyValue {
  const parts = dateParts(text);
  if (!parts || parts[0] === 0 || parts[1] === 0 || parts[2] === 0) return { type: 'none' };
  const shown = [...parts];
  // datetime's repr drops a zero microsecond, then a zero second.
  if (shown[6] === 0) {
    shown.pop();
    if (shown[5] === 0) shown.pop();
  }
  const p2 = (n: number) => String(n).padStart(2, '0');
  const [y, mo, d, h, mi, s, us] = parts;
  const str = `${String(y).padStart(4, '0')}-${p2(mo)}-${p2(d)} ${p2(h)}:${p2(mi)}:${p2(s)}${us ? `.${String(us).padStart(6, '0')}` : ''}`;
  return { type: 'object', repr: `datetime.datetime(${shown.join(', ')})`, str };
}

function timedeltaValue(text: string): PyValue {
  const match = /^(-?)(\d+):(\d{2}):(\d{2})(?:\.(\d{1,6}))?$/.exec(text);
  if (!match) return { type: 'str', value: text };
  const micros =
    (BigInt(match[2]) * 3600n + BigInt(match[3]) * 60n + BigInt(match[4])) * 1_000_000n + BigInt((match[5] ?? '').padEnd(6, '0') || '0');
  const total = match[1] === '-' ? -micros : micros;
  const day = 86_400_000_000n;
  let days = total / day;
  let rest = total % day;
  if (rest < 0n) {
    rest += day;
    days -= 1n;
  }
  const seconds = rest / 1_000_000n;
  const microseconds = rest % 1_000_000n;
  const fields = [
    days !== 0n ? `days=${days}` : null,
    seconds !== 0n ? `seconds=${seconds}` : null,
    microseconds !== 0n ? `microseconds=${microseconds}` : null,
  ].filter((f): f is string => f !== null);
  const hours = seconds / 3600n;
  const clock = `${hours}:${String((seconds % 3600n) / 60n).padStart(2, '0')}:${String(seconds % 60n).padStart(2, '0')}${microseconds ? `.${String(microseconds).padStart(6, '0')}` : ''}`;
  const str = days !== 0n ? `${days} day${days === 1n || days === -1n ? '' : 's'}, ${clock}` : clock;
  return { type: 'object', repr: `datetime.timedelta(${fields.length ? fields.join(', ') : '0'})`, str };
}

/**
 * One column value as mysql-connector's C extension converts it, from the
 * raw bytes the server sent (text protocol) and the column's type and charset.
 */
export function mysqlValueToPy(raw: Buffer | null, column: ColumnMeta): PyValue {
  if (raw === null) return { type: 'none' };
  const T = MYSQL_TYPES;
  switch (column.columnType) {
    case T.TINY:
    case T.SHORT:
    case T.LONG:
    case T.LONGLONG:
    case T.INT24:
    case T.YEAR:
      return { type: 'int', value: BigInt(raw.toString('latin1')) };
    case T.FLOAT:
    case T.DOUBLE:
      return { type: 'float', value: Number(raw.toString('latin1')) };
    case T.DECIMAL:
    case T.NEWDECIMAL: {
      const text = pyDecimalStr(raw.toString('latin1'));
      return { type: 'object', repr: `Decimal(${pyStrRepr(text)})`, str: text };
    }
    case T.BIT: {
      let value = 0n;
      for (const byte of raw) value = (value << 8n) | BigInt(byte);
      return { type: 'int', value };
    }
    case T.DATE:
    case T.NEWDATE:
      return dateValue(raw.toString('latin1'));
    case T.DATETIME:
    case T.TIMESTAMP:
    case T.DATETIME2:
    case T.TIMESTAMP2:
      return datetimeValue(raw.toString('latin1'));
    case T.TIME:
    case T.TIME2:
      return timedeltaValue(raw.toString('latin1'));
    case T.NULL:
      return { type: 'none' };
    case T.GEOMETRY:
    case T.VECTOR:
      return { type: 'bytes', value: new Uint8Array(raw) };
    default:
      if (column.characterSet === BINARY_CHARSET) return { type: 'bytes', value: new Uint8Array(raw) };
      return { type: 'str', value: raw.toString('utf8') };
  }
}
