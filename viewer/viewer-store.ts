/**
 * What the trajectory viewer reads from the run store, page by page (the
 * queries are the store's: core/store/viewer-queries.ts), on connections
 * that cannot write.
 */
import { DEFAULT_DB_POOL_SIZE, RunStore } from '../core/store/run-store';
import type { RolloutFilter, RolloutKey } from '../core/store/viewer-queries';

export { keyOf, type RolloutFilter, type RolloutKey, type RolloutRow, type RunRow, type TrajectoryRow } from '../core/store/viewer-queries';

export class ViewerStore {
  constructor(readonly runs: RunStore) {}

  /**
   * On sessions that cannot write (RunStore.connectReadOnly), so the viewer
   * cannot change a run whatever it is asked. `poolSize`: the most connections
   * it opens (dbPoolSizeFromEnv at process start).
   */
  static connect(databaseUrl: string, poolSize = DEFAULT_DB_POOL_SIZE): ViewerStore {
    const lost = (err: Error) =>
      process.stderr.write(`viewer: the database cut an idle connection (${err.message}); the next page reconnects\n`);
    return new ViewerStore(RunStore.connectReadOnly(databaseUrl, lost, poolSize));
  }

  close(): Promise<void> {
    return this.runs.close();
  }

  check(where: string) {
    return this.runs.viewer.check(where);
  }
  listRuns(offset: number, limit: number) {
    return this.runs.viewer.listRuns(offset, limit);
  }
  run(runId: string) {
    return this.runs.viewer.run(runId);
  }
  baseSuccessByRun(runIds: readonly string[]) {
    return this.runs.viewer.baseSuccessByRun(runIds);
  }
  steps(runId: string, offset: number, limit: number) {
    return this.runs.viewer.steps(runId, offset, limit);
  }
  step(runId: string, step: number) {
    return this.runs.viewer.step(runId, step);
  }
  stepRollouts(runId: string, step: number) {
    return this.runs.viewer.stepRollouts(runId, step);
  }
  routingDecisions(runId: string, step: number) {
    return this.runs.viewer.routingDecisions(runId, step);
  }
  trajectory(runId: string, key: RolloutKey) {
    return this.runs.viewer.trajectory(runId, key);
  }
  searchRollouts(runId: string, filter: RolloutFilter, after: RolloutKey | null, limit: number) {
    return this.runs.viewer.searchRollouts(runId, filter, after, limit);
  }
  filterValues(runId: string) {
    return this.runs.viewer.filterValues(runId);
  }
  sideBySide(runId: string, taskId: string) {
    return this.runs.viewer.sideBySide(runId, taskId);
  }
}
