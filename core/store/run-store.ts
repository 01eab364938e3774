/**
 * The run store in PostgreSQL. Every write is idempotent (keyed inserts with
 * ON CONFLICT DO NOTHING), so any activity may run twice and nothing doubles.
 * One store per aggregate, each in its own file, all on one connection pool
 * that only they query: `RunStore` holds them, some as fields
 * (`store.evolutions`), the rest behind the methods callers have always
 * called (`store.getRun`).
 */
import { Pool, type QueryResult, type QueryResultRow } from 'pg';
import type { Trajectory } from '../policy/trajectory';
import type { BehaviorProfiles } from '../router/profiles';
import type { RoutingDecision } from '../router/router';
import type { EvaluationSummary } from '../rl/evaluation';
import { DEFAULT_DB_POOL_SIZE } from './database';
import { EvolutionStore } from './evolution-store';
import { TrackingStore } from './tracking-store';
import { TrainingBatchStore } from './training-batch-store';
import { SessionLeaseStore } from './session-lease-store';
import { ReplicaStore } from './replica-store';
import { RunsStore } from './runs-store';
import { CheckpointStore } from './checkpoint-store';
import { TrajectoryStore } from './trajectory-store';
import { StepStore, type TrainerStepRecord } from './step-store';
import { RoutingStore } from './routing-store';
import { ViewerQueries } from './viewer-queries';

export {
  DEFAULT_DATABASE_URL,
  databaseUrlFromEnv,
  DB_POOL_SIZE_VARIABLE,
  DEFAULT_DB_POOL_SIZE,
  DbPoolSizeError,
  dbPoolSizeFromEnv,
  redactedDatabaseUrl,
  ensureDatabase,
  migrate,
  serverVersion,
} from './database';
export { RunIdInUseError, type LiveTrainerSession, type StoredRun } from './runs-store';
export type { CheckpointRecord, RestoreKind, RestoreRecord } from './checkpoint-store';
export type { TrajectoryKey } from './trajectory-store';
export { stepRecord, type StepRecord, type TrainerOpRecord, type TrainerOpSeq, type TrainerStepRecord } from './step-store';
export { routingDecisionFromRow, type StoredRoutingDecision } from './routing-store';

const reportLostConnection = (err: Error) =>
  process.stderr.write(`run store: the database cut an idle connection (${err.message}); the pool reconnects on the next query\n`);

export class RunStore {
  /** The evolution records and frozen pools (evolution-store.ts), on the same connection pool. */
  readonly evolutions: EvolutionStore;
  /** What each run has logged to experiment trackers (tracking-store.ts). */
  readonly tracking: TrackingStore;
  /** Training steps' batches, which the trainer reads by reference (training-batch-store.ts). */
  readonly trainingBatches: TrainingBatchStore;
  /** The leases on remote env servers' session slots, shared by every host (session-lease-store.ts). */
  readonly sessionLeases: SessionLeaseStore;
  /** Which policy versions each inference replica serves (replica-store.ts). */
  readonly replicas: ReplicaStore;
  /** What the trajectory viewer reads, page by page (viewer-queries.ts). */
  readonly viewer: ViewerQueries;

  // The stores the methods below answer from.
  readonly #runs: RunsStore;
  readonly #checkpoints: CheckpointStore;
  readonly #trajectories: TrajectoryStore;
  readonly #steps: StepStore;
  readonly #routing: RoutingStore;
  readonly #pool: Pool;

  constructor(pool: Pool) {
    this.#pool = pool;
    this.evolutions = new EvolutionStore(pool);
    this.tracking = new TrackingStore(pool);
    this.trainingBatches = new TrainingBatchStore(pool);
    this.sessionLeases = new SessionLeaseStore(pool);
    this.replicas = new ReplicaStore(pool);
    this.viewer = new ViewerQueries(pool);
    this.#runs = new RunsStore(pool);
    this.#checkpoints = new CheckpointStore(pool);
    this.#trajectories = new TrajectoryStore(pool);
    this.#steps = new StepStore(pool);
    this.#routing = new RoutingStore(pool);
  }

  /**
   * A database restart cuts the pool's idle connections, which pg reports as
   * an 'error' event on the pool: with no listener, that ends the process. The
   * pool drops those connections and opens new ones on the next query; a query
   * in flight fails (an activity is retried). `onConnectionLost` says so where
   * the caller logs; stderr when absent. `poolSize`: the most connections it
   * opens (dbPoolSizeFromEnv at process start).
   */
  static connect(
    databaseUrl: string,
    onConnectionLost: (err: Error) => void = reportLostConnection,
    poolSize = DEFAULT_DB_POOL_SIZE,
  ): RunStore {
    const pool = new Pool({ connectionString: databaseUrl, max: poolSize });
    pool.on('error', onConnectionLost);
    return new RunStore(pool);
  }

  /**
   * A store whose sessions cannot write (PostgreSQL refuses any write in a
   * read-only transaction) and whose queries end after 30 s: the viewer's, so
   * it cannot change a run whatever it is asked.
   */
  static connectReadOnly(databaseUrl: string, onConnectionLost: (err: Error) => void, poolSize = DEFAULT_DB_POOL_SIZE): RunStore {
    const pool = new Pool({
      connectionString: databaseUrl,
      max: poolSize,
      options: '-c default_transaction_read_only=on -c statement_timeout=30000',
    });
    pool.on('error', onConnectionLost);
    return new RunStore(pool);
  }

  close(): Promise<void> {
    return this.#pool.end();
  }

  /** SQL straight at the store's database, for tests that check rows no method reads; the code itself goes through the methods. */
  queryForTests<R extends QueryResultRow = QueryResultRow>(text: string, values?: unknown[]): Promise<QueryResult<R>> {
    return this.#pool.query<R>(text, values);
  }

  // ----------------------------------------------------------------- runs (runs-store.ts)

  registerRun(run: Parameters<RunsStore['registerRun']>[0]) {
    return this.#runs.registerRun(run);
  }
  updateRunConfig(runId: string, fromStep: number, config: unknown) {
    return this.#runs.updateRunConfig(runId, fromStep, config);
  }
  configChanges(runId: string) {
    return this.#runs.configChanges(runId);
  }
  getRun(runId: string) {
    return this.#runs.getRun(runId);
  }
  setParent(runId: string, parent: { runId: string; step: number }) {
    return this.#runs.setParent(runId, parent);
  }
  markRunFinished(runId: string) {
    return this.#runs.markRunFinished(runId);
  }
  liveTrainerSessions(activeWithinSeconds: number) {
    return this.#runs.liveTrainerSessions(activeWithinSeconds);
  }
  claimTrainerModel(runId: string, modelId: string, sessionId: string) {
    return this.#runs.claimTrainerModel(runId, modelId, sessionId);
  }
  deleteRun(runId: string) {
    return this.#runs.deleteRun(runId);
  }

  // ------------------------------------------------- checkpoints and restores (checkpoint-store.ts)

  recordCheckpoint(c: Parameters<CheckpointStore['recordCheckpoint']>[0]) {
    return this.#checkpoints.recordCheckpoint(c);
  }
  checkpoints(runId: string, options: { includeDeleted?: boolean } = {}) {
    return this.#checkpoints.checkpoints(runId, options);
  }
  markCheckpointDeleted(runId: string, modelId: string, name: string) {
    return this.#checkpoints.markCheckpointDeleted(runId, modelId, name);
  }
  startRestore(r: Parameters<CheckpointStore['startRestore']>[0]) {
    return this.#checkpoints.startRestore(r);
  }
  findRestore(runId: string, lostModelId: string | null) {
    return this.#checkpoints.findRestore(runId, lostModelId);
  }
  setRestoreModel(runId: string, restore: number, modelId: string, sessionId: string) {
    return this.#checkpoints.setRestoreModel(runId, restore, modelId, sessionId);
  }
  completeRestore(r: Parameters<CheckpointStore['completeRestore']>[0]) {
    return this.#checkpoints.completeRestore(r);
  }
  restore(runId: string, restore: number) {
    return this.#checkpoints.restore(runId, restore);
  }
  restores(runId: string) {
    return this.#checkpoints.restores(runId);
  }
  supersededBy(runId: string, restore: number) {
    return this.#checkpoints.supersededBy(runId, restore);
  }

  // ------------------------------------------------------- trajectories (trajectory-store.ts)

  insertTrajectories(runId: string, phase: string, step: number, role: string, trajectories: readonly Trajectory[]) {
    return this.#trajectories.insertTrajectories(runId, phase, step, role, trajectories);
  }
  secondsSinceGroupStored(runId: string, phase: string, step: number, taskId: string, role: string) {
    return this.#trajectories.secondsSinceGroupStored(runId, phase, step, taskId, role);
  }
  rolloutSummaries(runId: string, phase: string, step: number, taskId: string, harnessIds: readonly string[]) {
    return this.#trajectories.rolloutSummaries(runId, phase, step, taskId, harnessIds);
  }
  tokenSamples(runId: string, phase: string, step: number, taskIds: readonly string[]) {
    return this.#trajectories.tokenSamples(runId, phase, step, taskIds);
  }
  evalSuccessByKind(runIds: readonly string[]) {
    return this.#trajectories.evalSuccessByKind(runIds);
  }
  countStepTrajectories(runId: string, phase: string, step: number) {
    return this.#trajectories.countStepTrajectories(runId, phase, step);
  }
  countTrajectories(runId: string, phase = 'train') {
    return this.#trajectories.countTrajectories(runId, phase);
  }

  // ------------------------------------------------- steps and trainer ops (step-store.ts)

  recordStep(runId: string, step: number, policyVersion: string, summary: unknown) {
    return this.#steps.recordStep(runId, step, policyVersion, summary);
  }
  steps(runId: string) {
    return this.#steps.steps(runId);
  }
  lastStep(runId: string) {
    return this.#steps.lastStep(runId);
  }
  recordTrainerStep(record: TrainerStepRecord) {
    return this.#steps.recordTrainerStep(record);
  }
  trainerOpSeq(args: Parameters<StepStore['trainerOpSeq']>[0]) {
    return this.#steps.trainerOpSeq(args);
  }
  failTrainerOp(modelId: string, seqId: number, failure: string) {
    return this.#steps.failTrainerOp(modelId, seqId, failure);
  }
  trainerOps(runId: string, step?: number) {
    return this.#steps.trainerOps(runId, step);
  }
  trainerStep(runId: string, step: number) {
    return this.#steps.trainerStep(runId, step);
  }
  trainedSteps(runId: string) {
    return this.#steps.trainedSteps(runId);
  }

  // --------------------------------------- profiles, routing and evaluations (routing-store.ts)

  copyProfiles(fromRunId: string, toRunId: string, upToVersion: number) {
    return this.#routing.copyProfiles(fromRunId, toRunId, upToVersion);
  }
  saveProfiles(runId: string, profiles: BehaviorProfiles) {
    return this.#routing.saveProfiles(runId, profiles);
  }
  profiles(runId: string, version: number) {
    return this.#routing.profiles(runId, version);
  }
  profileVersions(runId: string) {
    return this.#routing.profileVersions(runId);
  }
  latestProfileVersion(runId: string) {
    return this.#routing.latestProfileVersion(runId);
  }
  recordRoutingDecision(runId: string, step: number, decision: RoutingDecision) {
    return this.#routing.recordRoutingDecision(runId, step, decision);
  }
  routingDecision(runId: string, step: number, taskId: string) {
    return this.#routing.routingDecision(runId, step, taskId);
  }
  routingDecisions(runId: string) {
    return this.#routing.routingDecisions(runId);
  }
  settleRoutingDecisions(runId: string, step: number) {
    return this.#routing.settleRoutingDecisions(runId, step);
  }
  recordEvaluation(runId: string, summary: EvaluationSummary) {
    return this.#routing.recordEvaluation(runId, summary);
  }
  evaluations(runId: string) {
    return this.#routing.evaluations(runId);
  }
}
