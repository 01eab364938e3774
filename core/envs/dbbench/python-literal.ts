/**
 * Python's `eval()` of a literal (strings, numbers, None/True/False, lists,
 * tuples, sets, dicts): how AgentBench reads an agent's `Final Answer`.
 */
import { pyHashKey, type PyValue } from './python-values';

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
  '\\': '\\',
  "'": "'",
  '"': '"',
  a: '\x07',
  b: '\b',
  f: '\f',
  n: '\n',
  r: '\r',
  t: '\t',
  v: '\v',
  '\n': '',
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
    const number =
      /^(?:(?:\d(?:_?\d)*)?\.\d(?:_?\d)*(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*\.(?:[eE][+-]?\d(?:_?\d)*)?|\d(?:_?\d)*[eE][+-]?\d(?:_?\d)*|\d(?:_?\d)*)/.exec(
        rest,
      );
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
