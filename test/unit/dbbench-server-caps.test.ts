import { ibtmp1MaxBytes } from '../../core/envs/dbbench/server-caps';

describe('reading the ibtmp1 cap from innodb_temp_data_file_path (what `harness-s doctor` reports)', () => {
  test('a max: with or without a unit is read in bytes', () => {
    expect(ibtmp1MaxBytes('ibtmp1:12M:autoextend:max:1G')).toBe(1024 ** 3);
    expect(ibtmp1MaxBytes('ibtmp1:12M:autoextend:max:1024M')).toBe(1024 ** 3);
    expect(ibtmp1MaxBytes('ibtmp1:12M:autoextend:max:500k')).toBe(500 * 1024);
    expect(ibtmp1MaxBytes('ibtmp1:12M:autoextend:max:4096')).toBe(4096);
  });

  test('a path that may autoextend without max: has no cap; files that do not autoextend are their sizes', () => {
    expect(ibtmp1MaxBytes('ibtmp1:12M:autoextend')).toBeNull();
    expect(ibtmp1MaxBytes('ibtmp1:12M')).toBe(12 * 1024 ** 2);
    expect(ibtmp1MaxBytes('ibtmp1:12M;ibtmp2:4M')).toBe(16 * 1024 ** 2);
  });
});
