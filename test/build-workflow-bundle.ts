/**
 * Bundles the workflow code once for a whole `npm test` (test/suite.sh), into
 * the file named by the first argument; the suite's workers read it through
 * $HARNESS_S_WORKFLOW_BUNDLE (workers/worker.ts) instead of each running
 * webpack over the same code.
 */
import { writeFileSync } from 'node:fs';
import { buildWorkflowBundle, WORKFLOW_BUNDLE_FILE_VARIABLE } from '../workers/worker';

async function main(): Promise<void> {
  const file = process.argv[2];
  if (!file) throw new Error('usage: tsx test/build-workflow-bundle.ts FILE');
  delete process.env[WORKFLOW_BUNDLE_FILE_VARIABLE];
  writeFileSync(file, JSON.stringify(await buildWorkflowBundle()));
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
