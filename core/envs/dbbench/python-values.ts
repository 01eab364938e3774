/**
 * A small model of Python values, enough to speak AgentBench's Python side:
 * `repr`/`str` as CPython prints them, `==` and hashing as Python compares
 * them, and the conversions (`float()`, `list()`, `str.strip()`, `len()`)
 * AgentBench applies to the rows it fetched and the answers it scored.
 */

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
const PY_SPACE =
  '\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000';

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
      a.entries.length === b.entries.length && a.entries.every(([k, v]) => b.entries.some(([k2, v2]) => pyEquals(k, k2) && pyEquals(v, v2)))
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
