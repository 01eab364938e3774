/** $HARNESS_S_DB_POOL_SIZE: how many PostgreSQL connections one process's run store may open. */
import { DB_POOL_SIZE_VARIABLE, DbPoolSizeError, dbPoolSizeFromEnv, DEFAULT_DB_POOL_SIZE } from '../../core/store/run-store';

const withSize = (value: string | undefined) => (value === undefined ? {} : { [DB_POOL_SIZE_VARIABLE]: value });

test('unset or empty, a process opens at most 10 connections', () => {
  expect(DEFAULT_DB_POOL_SIZE).toBe(10);
  expect(dbPoolSizeFromEnv(withSize(undefined))).toBe(10);
  expect(dbPoolSizeFromEnv(withSize(''))).toBe(10);
  expect(dbPoolSizeFromEnv(withSize('  '))).toBe(10);
});

test('a whole number from 1 to 1000 is the pool size', () => {
  expect(dbPoolSizeFromEnv(withSize('1'))).toBe(1);
  expect(dbPoolSizeFromEnv(withSize(' 40 '))).toBe(40);
  expect(dbPoolSizeFromEnv(withSize('1000'))).toBe(1000);
});

test.each(['0', '1001', '-5', '2.5', '1e2', 'ten', '0x10', '12abc'])('%s is refused, naming the variable and the value', (value) => {
  expect(() => dbPoolSizeFromEnv(withSize(value))).toThrow(DbPoolSizeError);
  expect(() => dbPoolSizeFromEnv(withSize(value))).toThrow(
    `HARNESS_S_DB_POOL_SIZE='${value}' is not a connection pool size: use a whole number from 1 to 1000`,
  );
});
