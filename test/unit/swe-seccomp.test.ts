import { compileSeccomp, SECCOMP_RULES } from '../../core/envs/swe/seccomp';

describe("the SWE sandbox's seccomp filter", () => {
  test('the rules compile with libseccomp into a classic BPF program (whole 8-byte instructions)', () => {
    const program = compileSeccomp();
    expect(program.length).toBeGreaterThan(8 * SECCOMP_RULES.filter((r) => !r.when).length);
    expect(program.length % 8).toBe(0);
  });

  test('a rule naming no syscall is refused, naming it', () => {
    expect(() =>
      compileSeccomp([
        { syscall: 'mount', errno: 1 },
        { syscall: 'mounnt', errno: 1 },
      ]),
    ).toThrow(/no syscall named 'mounnt'/);
  });
});
