/**
 * MySQL column values as mysql-connector's C extension returns them to
 * AgentBench: the raw bytes of the text protocol, by column type and charset,
 * turned into the Python values (int, float, Decimal, datetime, str, bytes...) it prints.
 */
import { pyStrRepr, type PyValue } from './python-values';

/** MySQL protocol column type codes (include/mysql_com.h). */
export const MYSQL_TYPES = {
  DECIMAL: 0,
  TINY: 1,
  SHORT: 2,
  LONG: 3,
  FLOAT: 4,
  DOUBLE: 5,
  NULL: 6,
  TIMESTAMP: 7,
  LONGLONG: 8,
  INT24: 9,
  DATE: 10,
  TIME: 11,
  DATETIME: 12,
  YEAR: 13,
  NEWDATE: 14,
  VARCHAR: 15,
  BIT: 16,
  TIMESTAMP2: 17,
  DATETIME2: 18,
  TIME2: 19,
  VECTOR: 242,
  JSON: 245,
  NEWDECIMAL: 246,
  ENUM: 247,
  SET: 248,
  TINY_BLOB: 249,
  MEDIUM_BLOB: 250,
  LONG_BLOB: 251,
  BLOB: 252,
  VAR_STRING: 253,
  STRING: 254,
  GEOMETRY: 255,
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
    return point > 0 ? `${sign}${coefficient.slice(0, point)}.${coefficient.slice(point)}` : `${sign}0.${'0'.repeat(-point)}${coefficient}`;
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
