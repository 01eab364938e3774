/**
 * A client of AppWorld's environment-server protocol (`appworld serve
 * environment`): POST /initialize, /execute, /task_completed, /evaluate,
 * /close with a JSON body of top-level fields; every reply `{"output": ...}`.
 *
 * What the server (appworld 0.1.3) does that a client must know:
 * - its own errors (no world, another task's id, an unknown task) come back
 *   as HTTP 500 with a plain-text body, not JSON: any non-200 is an error;
 * - the agent's code failing is not an error: 200 with output
 *   "Execution failed. Traceback: ...";
 * - /evaluate must be sent suppress_errors: true, or one failing check is a 500;
 * - it holds one world at a time: /initialize replaces the one before.
 */
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';

export class AppWorldServerError extends Error {
  override name = 'AppWorldServerError';
}

export const Supervisor = z.object({ first_name: z.string(), last_name: z.string(), email: z.string(), phone_number: z.string() });
export type Supervisor = z.infer<typeof Supervisor>;

export const InitializeOutput = z.object({
  task_id: z.string(),
  instruction: z.string(),
  supervisor: Supervisor,
  datetime: z.string(),
});
export type InitializeOutput = z.infer<typeof InitializeOutput>;

export const EvaluateOutput = z.object({
  success: z.boolean(),
  difficulty: z.number().int().nullable().optional(),
  num_tests: z.number().int(),
  passes: z.array(z.object({ requirement: z.string(), label: z.string().optional() })),
  failures: z.array(z.object({ requirement: z.string(), trace: z.string().optional(), label: z.string().optional() })),
});
export type EvaluateOutput = z.infer<typeof EvaluateOutput>;

/** The prefix of /execute's output when the agent's code raised (still HTTP 200). */
export const EXECUTION_FAILED = 'Execution failed.';

export interface InitializeOptions {
  /** Where the server writes the episode's outputs: experiments/outputs/<name>/tasks/<task_id>. */
  experimentName: string;
  /** Seconds an /execute may run (AppWorld's own limit). */
  timeoutSeconds?: number;
  randomSeed?: number;
}

export class AppWorldClient {
  constructor(
    readonly baseUrl: string,
    private readonly requestTimeoutMs = 120_000,
  ) {}

  private async post<T>(endpoint: string, body: Record<string, unknown>, output: z.ZodType<T>, signal?: AbortSignal): Promise<T> {
    let response: Response;
    try {
      response = await fetch(`${this.baseUrl}${endpoint}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: signal ? AbortSignal.any([signal, AbortSignal.timeout(this.requestTimeoutMs)]) : AbortSignal.timeout(this.requestTimeoutMs),
      });
    } catch (err) {
      throw new AppWorldServerError(`AppWorld server ${this.baseUrl}: POST ${endpoint} got no answer: ${(err as Error).message}`);
    }
    const text = await response.text();
    if (response.status !== 200) {
      throw new AppWorldServerError(`AppWorld server ${this.baseUrl}: POST ${endpoint} answered HTTP ${response.status}: ${text.slice(0, 500)}`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch {
      throw new AppWorldServerError(`AppWorld server ${this.baseUrl}: POST ${endpoint} answered with a body that is not JSON: ${text.slice(0, 200)}`);
    }
    const parsed = z.object({ output: output }).safeParse(json);
    if (!parsed.success) {
      throw new AppWorldServerError(`AppWorld server ${this.baseUrl}: POST ${endpoint}'s reply is not what the protocol says:\n${formatZodError(parsed.error)}`);
    }
    return parsed.data.output;
  }

  /** Loads the task's world (replacing whatever the server held). */
  initialize(taskId: string, options: InitializeOptions, signal?: AbortSignal): Promise<InitializeOutput> {
    return this.post('/initialize', {
      task_id: taskId,
      experiment_name: options.experimentName,
      ...(options.timeoutSeconds !== undefined ? { timeout_seconds: options.timeoutSeconds } : {}),
      ...(options.randomSeed !== undefined ? { random_seed: options.randomSeed } : {}),
    }, InitializeOutput, signal);
  }

  /** Runs Python code in the world; what it printed (or the traceback) comes back. */
  execute(taskId: string, code: string, signal?: AbortSignal): Promise<string> {
    return this.post('/execute', { task_id: taskId, code }, z.string(), signal);
  }

  /** Has the agent called apis.supervisor.complete_task? */
  taskCompleted(taskId: string, signal?: AbortSignal): Promise<boolean> {
    return this.post('/task_completed', { task_id: taskId }, z.boolean(), signal);
  }

  /** The task's checks against the world as it is now (task goal completion: every check passes). */
  evaluate(taskId: string, signal?: AbortSignal): Promise<EvaluateOutput> {
    return this.post('/evaluate', { task_id: taskId, suppress_errors: true, report: false }, EvaluateOutput, signal);
  }

  close(taskId: string, signal?: AbortSignal): Promise<null> {
    return this.post('/close', { task_id: taskId }, z.null(), signal);
  }

  /** The server is up (GET / answers 200). */
  async alive(): Promise<boolean> {
    try {
      const response = await fetch(`${this.baseUrl}/`, { signal: AbortSignal.timeout(2000) });
      await response.text();
      return response.status === 200;
    } catch {
      return false;
    }
  }
}
