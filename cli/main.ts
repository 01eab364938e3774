/**
 * `harness-s`: bring up the embedded stack, launch and operate runs.
 * Progress goes to stderr, results to stdout; --json for scripts. Exit codes:
 * 0 ok, 1 failure, 2 user error. The command tree is in cli/program.ts.
 */
import { buildProgram } from './program';
import { progress } from './commands/shared';

buildProgram()
  .parseAsync()
  .catch((err) => {
    progress(`harness-s: ${err instanceof Error ? err.message : String(err)}`);
    process.exit(1);
  });
