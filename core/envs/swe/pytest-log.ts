/**
 * Per-test results from a `pytest -rA` log, as SWE-bench reads them: the
 * short test summary has one `STATUS node-id[ - message]` line per test.
 */

export type TestStatus = 'PASSED' | 'FAILED' | 'ERROR' | 'XFAIL' | 'XPASS';

const STATUS_LINE = /^(PASSED|FAILED|ERROR|XFAIL|XPASS) (.+)$/;
/** pytest 9 reports a failed unittest subTest on its own line and the test itself as PASSED: the test failed. */
const SUBTEST_FAILED = /^SUBFAIL(?:ED)?(?:\([^)]*\)|\[[^\]]*\])? (.+)$/;

/** As SWE-bench: a test counts as passing when it passed or failed as expected. */
export function passes(status: TestStatus | undefined): boolean {
  return status === 'PASSED' || status === 'XFAIL';
}

/**
 * Every test the summary names, with its status. A node id may itself hold
 * " - " (a parametrize id), so when the ids looked for are known, a line is
 * matched against them first; otherwise the id ends at the first " - ".
 */
export function parsePytestLog(log: string, knownIds: readonly string[] = []): Map<string, TestStatus> {
  const known = [...knownIds].sort((a, b) => b.length - a.length);
  const results = new Map<string, TestStatus>();
  for (const line of log.split('\n')) {
    const sub = SUBTEST_FAILED.exec(line.trimEnd());
    const match = sub ? (['', 'FAILED', sub[1]] as const) : STATUS_LINE.exec(line.trimEnd());
    if (!match) continue;
    const status = match[1] as TestStatus;
    const rest = match[2];
    const id = known.find((k) => rest === k || rest.startsWith(`${k} - `)) ?? rest.split(' - ')[0];
    // The worse status wins when a test is reported twice (a failed teardown after a pass).
    const previous = results.get(id);
    if (previous === undefined || (passes(previous) && !passes(status))) results.set(id, status);
  }
  return results;
}
