/**
 * A small client of MLflow's tracking REST API (the subset Harness-S logs
 * with, plus the reads its tests check with), written against `mlflow server`
 * 3.x: JSON bodies under /api/2.0/mlflow/, artifacts through the server's
 * proxied artifact API (/api/2.0/mlflow-artifacts/artifacts/...). Replies are
 * parsed with zod; an error names the URL and what MLflow said.
 */
import { z } from 'zod';

/** One request's limit: a tracking server that hangs fails the call instead of holding it. */
const REQUEST_TIMEOUT_MS = 15_000;
/** MLflow's limits per runs/log-batch (mlflow/utils/validation.py). */
export const MAX_METRICS_PER_BATCH = 1000;
export const MAX_PARAMS_PER_BATCH = 100;
export const MAX_PARAM_VALUE_LENGTH = 6000;

export class MlflowError extends Error {
  override name = 'MlflowError';
  constructor(
    message: string,
    /** MLflow's error_code (RESOURCE_DOES_NOT_EXIST, INVALID_PARAMETER_VALUE, ...), or null when it did not answer. */
    readonly errorCode: string | null,
  ) {
    super(message);
  }
}

const Experiment = z.object({ experiment_id: z.string(), name: z.string(), artifact_location: z.string().optional() });
const Tag = z.object({ key: z.string(), value: z.string() });
const RunInfo = z.object({
  run_id: z.string(),
  experiment_id: z.string(),
  run_name: z.string().optional(),
  status: z.string(),
  start_time: z.coerce.number().optional(),
  end_time: z.coerce.number().optional(),
  artifact_uri: z.string(),
});
const Metric = z.object({ key: z.string(), value: z.number(), timestamp: z.coerce.number(), step: z.coerce.number().default(0) });
const Run = z.object({
  info: RunInfo,
  data: z
    .object({
      params: z.array(Tag).default([]),
      tags: z.array(Tag).default([]),
      metrics: z.array(Metric).default([]),
    })
    .default({ params: [], tags: [], metrics: [] }),
});
export type MlflowRun = z.infer<typeof Run>;
export type MlflowMetric = z.infer<typeof Metric>;
const ErrorReply = z.object({ error_code: z.string(), message: z.string() });
const FileInfo = z.object({ path: z.string(), is_dir: z.boolean().optional(), file_size: z.coerce.number().optional() });

export interface MlflowClientOptions {
  /** The tracking server, e.g. http://127.0.0.1:5000 ($MLFLOW_TRACKING_URI). */
  trackingUri: string;
  fetch?: typeof fetch;
}

export class MlflowClient {
  private readonly base: string;
  private readonly fetchImpl: typeof fetch;

  constructor(options: MlflowClientOptions) {
    if (!/^https?:\/\//.test(options.trackingUri)) {
      throw new MlflowError(
        `MLflow tracking URI ${options.trackingUri} is not an http(s) URL of a tracking server (such as http://127.0.0.1:5000)`,
        null,
      );
    }
    this.base = options.trackingUri.replace(/\/+$/, '');
    this.fetchImpl = options.fetch ?? fetch;
  }

  /** The experiment of that name, or null when there is none. */
  async experimentByName(name: string): Promise<{ experimentId: string; name: string } | null> {
    try {
      const reply = await this.call(
        'GET',
        `experiments/get-by-name?experiment_name=${encodeURIComponent(name)}`,
        z.object({ experiment: Experiment }),
      );
      return { experimentId: reply.experiment.experiment_id, name: reply.experiment.name };
    } catch (err) {
      if (err instanceof MlflowError && err.errorCode === 'RESOURCE_DOES_NOT_EXIST') return null;
      throw err;
    }
  }

  /** The experiment's id, created when missing (a racing creator's experiment is found again). */
  async ensureExperiment(name: string): Promise<string> {
    const found = await this.experimentByName(name);
    if (found) return found.experimentId;
    try {
      return (await this.call('POST', 'experiments/create', z.object({ experiment_id: z.string() }), { name })).experiment_id;
    } catch (err) {
      const again = err instanceof MlflowError && err.errorCode === 'RESOURCE_ALREADY_EXISTS' ? await this.experimentByName(name) : null;
      if (again) return again.experimentId;
      throw err;
    }
  }

  async createRun(args: { experimentId: string; runName: string; startTime: number; tags: Record<string, string> }): Promise<MlflowRun> {
    const body = {
      experiment_id: args.experimentId,
      run_name: args.runName,
      start_time: args.startTime,
      tags: Object.entries(args.tags).map(([key, value]) => ({ key, value })),
    };
    return (await this.call('POST', 'runs/create', z.object({ run: Run }), body)).run;
  }

  async getRun(runId: string): Promise<MlflowRun> {
    return (await this.call('GET', `runs/get?run_id=${encodeURIComponent(runId)}`, z.object({ run: Run }))).run;
  }

  /** Runs of the experiments matching an MLflow search filter (e.g. tags.`harness_s.run_id` = 'x'), first page. */
  async searchRuns(experimentIds: readonly string[], filter: string, maxResults = 100): Promise<MlflowRun[]> {
    const reply = await this.call('POST', 'runs/search', z.object({ runs: z.array(Run).default([]) }), {
      experiment_ids: experimentIds,
      filter,
      max_results: maxResults,
    });
    return reply.runs;
  }

  /** One runs/log-batch: at most MAX_METRICS_PER_BATCH metrics and MAX_PARAMS_PER_BATCH params (the caller splits). */
  async logBatch(
    runId: string,
    batch: {
      metrics?: readonly MlflowMetric[];
      params?: ReadonlyArray<{ key: string; value: string }>;
      tags?: ReadonlyArray<{ key: string; value: string }>;
    },
  ): Promise<void> {
    await this.call('POST', 'runs/log-batch', z.object({}), {
      run_id: runId,
      metrics: batch.metrics ?? [],
      params: batch.params ?? [],
      tags: batch.tags ?? [],
    });
  }

  async updateRun(runId: string, status: 'RUNNING' | 'FINISHED' | 'FAILED' | 'KILLED', endTime?: number): Promise<void> {
    await this.call('POST', 'runs/update', z.object({ run_info: RunInfo }), {
      run_id: runId,
      status,
      ...(endTime === undefined ? {} : { end_time: endTime }),
    });
  }

  /** Every value a metric had, in MLflow's order (the tests read it back). */
  async metricHistory(runId: string, key: string): Promise<MlflowMetric[]> {
    const reply = await this.call(
      'GET',
      `metrics/get-history?run_id=${encodeURIComponent(runId)}&metric_key=${encodeURIComponent(key)}&max_results=25000`,
      z.object({ metrics: z.array(Metric).default([]) }),
    );
    return reply.metrics;
  }

  /** Uploads a file into the run's artifacts, through the server's proxied artifact API. */
  async uploadArtifact(run: MlflowRun, artifactPath: string, body: string | Uint8Array, contentType: string): Promise<void> {
    const url = `${this.base}/api/2.0/mlflow-artifacts/artifacts/${artifactRoot(run)}/${artifactPath.split('/').map(encodeURIComponent).join('/')}`;
    const response = await this.request(url, { method: 'PUT', headers: { 'content-type': contentType }, body });
    await this.parse(url, response, z.unknown());
  }

  async listArtifacts(runId: string, artifactPath = ''): Promise<Array<z.infer<typeof FileInfo>>> {
    const query = `run_id=${encodeURIComponent(runId)}${artifactPath ? `&path=${encodeURIComponent(artifactPath)}` : ''}`;
    return (await this.call('GET', `artifacts/list?${query}`, z.object({ files: z.array(FileInfo).default([]) }))).files;
  }

  async downloadArtifact(run: MlflowRun, artifactPath: string): Promise<string> {
    const url = `${this.base}/api/2.0/mlflow-artifacts/artifacts/${artifactRoot(run)}/${artifactPath.split('/').map(encodeURIComponent).join('/')}`;
    const response = await this.request(url, { method: 'GET' });
    if (!response.ok) await this.parse(url, response, z.unknown());
    return response.text();
  }

  private async call<T extends z.ZodType>(method: 'GET' | 'POST', endpoint: string, schema: T, body?: unknown): Promise<z.infer<T>> {
    const url = `${this.base}/api/2.0/mlflow/${endpoint}`;
    const response = await this.request(url, {
      method,
      ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    });
    return this.parse(url, response, schema);
  }

  private async request(url: string, init: RequestInit): Promise<Response> {
    try {
      return await this.fetchImpl(url, { ...init, signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new MlflowError(`MLflow at ${url} did not answer: ${cause?.code ?? cause?.message ?? (err as Error).message}`, null);
    }
  }

  private async parse<T extends z.ZodType>(url: string, response: Response, schema: T): Promise<z.infer<T>> {
    const text = await response.text();
    let json: unknown = null;
    try {
      json = text ? JSON.parse(text) : {};
    } catch {
      // not JSON: reported below with the text
    }
    if (!response.ok) {
      const error = ErrorReply.safeParse(json);
      const said = error.success ? `${error.data.error_code}: ${error.data.message}` : text.slice(0, 300) || response.statusText;
      throw new MlflowError(`MLflow at ${url} answered ${response.status}: ${said}`, error.success ? error.data.error_code : null);
    }
    const parsed = schema.safeParse(json);
    if (!parsed.success)
      throw new MlflowError(
        `MLflow at ${url} answered what this client does not read: ${parsed.error.message.slice(0, 300)} (reply: ${text.slice(0, 200)})`,
        null,
      );
    return parsed.data;
  }
}

/** `<experiment>/<run>/artifacts` from a run's artifact_uri (mlflow-artifacts:/1/<run>/artifacts); a server without proxied artifacts is refused by name. */
function artifactRoot(run: MlflowRun): string {
  const match = /^mlflow-artifacts:(?:\/\/[^/]*)?\/(.+)$/.exec(run.info.artifact_uri);
  if (!match) {
    throw new MlflowError(
      `MLflow run ${run.info.run_id} keeps its artifacts at ${run.info.artifact_uri}, which this client cannot write: start the tracking server with proxied artifacts (mlflow server --artifacts-destination ..., the default of harness-s mlflow serve)`,
      null,
    );
  }
  return match[1].replace(/\/+$/, '');
}
