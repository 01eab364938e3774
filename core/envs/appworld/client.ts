/**
 * A client of AppWorld's environment-server protocol (`appworld serve
 * environment`): POST /initialize, /execute, /task_completed, /evaluate,
 * /close with a JSON body of top-level fields; every reply `{"output": ...}`.
 * It speaks HTTP over the unix socket the sandboxed server listens on (the
 * sandbox has no network), and reads a reply only up to a byte cap, cutting
 * the request there while it streams.
 *
 * What the server (appworld 0.1.3) does that a client must know:
 * - its own errors (no world, another task's id, an unknown task) come back
 *   as HTTP 500 with a plain-text body, not JSON: any non-200 is an error;
 * - the agent's code failing is not an error: 200 with output
 *   "Execution failed. Traceback: ...";
 * - /evaluate must be sent suppress_errors: true, or one failing check is a 500;
 * - it holds one world at a time: /initialize replaces the one before.
 */
import { request } from 'node:http';
import { z } from 'zod';
import { formatZodError } from '../../zod-errors';

export class AppWorldServerError extends Error {
  override name = 'AppWorldServerError';
}

/** A request over its wall clock (the server may still be running the code). */
export class AppWorldTimeoutError extends AppWorldServerError {
  override name = 'AppWorldTimeoutError';
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
  /** Seconds an /execute may run (AppWorld's own limit, in the server; the worker's is RequestLimits.timeoutMs). */
  timeoutSeconds?: number;
  randomSeed?: number;
  /** Load the task's ground truth into the server: false for a server that runs the agent's code. */
  loadGroundTruth?: boolean;
}

export interface RequestLimits {
  timeoutMs?: number;
  /** Reply bytes read at most; past them the request is cut. */
  maxBytes?: number;
  signal?: AbortSignal;
}

/** What /execute printed; `cut`: the reply was over the byte cap, `output` is its start. */
export interface ExecuteReply {
  output: string;
  cut: boolean;
}

interface RawReply {
  status: number;
  body: Buffer;
  cut: boolean;
}

/** The start of a `{"output": "<string>"}` reply cut mid-way: the string's decoded prefix. */
export function outputPrefix(body: string): string {
  const opening = /^\s*\{\s*"output"\s*:\s*"/.exec(body);
  if (!opening) return '';
  let raw = body.slice(opening[0].length);
  // An escape may be cut in the middle: drop up to 6 characters until the rest decodes.
  for (let drop = 0; drop <= 6 && raw.length > 0; drop++) {
    try {
      return JSON.parse(`"${raw}"`) as string;
    } catch {
      raw = raw.slice(0, -1);
    }
  }
  return '';
}

export class AppWorldClient {
  constructor(
    /** The unix socket the server listens on. */
    readonly socketPath: string,
    private readonly requestTimeoutMs = 120_000,
    private readonly maxReplyBytes = 4 * 1024 * 1024,
  ) {}

  private raw(method: 'GET' | 'POST', endpoint: string, body: string | null, limits: RequestLimits): Promise<RawReply> {
    const maxBytes = limits.maxBytes ?? this.maxReplyBytes;
    const timeoutMs = limits.timeoutMs ?? this.requestTimeoutMs;
    return new Promise((resolve, reject) => {
      let settled = false;
      const done = (err: Error | null, reply?: RawReply) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        limits.signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve(reply!);
      };
      const req = request(
        {
          socketPath: this.socketPath,
          path: endpoint,
          method,
          agent: false,
          headers: body === null ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
        },
        (res) => {
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (chunk: Buffer) => {
            if (settled) return;
            if (size + chunk.length > maxBytes) {
              // Over the cap: stop reading here, so no more of it reaches the worker's memory.
              chunks.push(chunk.subarray(0, maxBytes - size));
              done(null, { status: res.statusCode ?? 0, body: Buffer.concat(chunks), cut: true });
              req.destroy();
              return;
            }
            chunks.push(chunk);
            size += chunk.length;
          });
          res.on('end', () => done(null, { status: res.statusCode ?? 0, body: Buffer.concat(chunks), cut: false }));
          res.on('error', (err) => done(err));
        },
      );
      const timer = setTimeout(() => {
        done(new AppWorldTimeoutError(`AppWorld server: ${method} ${endpoint} got no answer within ${timeoutMs / 1000} s`));
        req.destroy();
      }, timeoutMs);
      const onAbort = () => {
        done(limits.signal!.reason instanceof Error ? limits.signal!.reason : new Error(String(limits.signal!.reason)));
        req.destroy();
      };
      if (limits.signal?.aborted) return onAbort();
      limits.signal?.addEventListener('abort', onAbort, { once: true });
      req.on('error', (err) => done(new AppWorldServerError(`AppWorld server: ${method} ${endpoint} got no answer: ${err.message}`)));
      req.end(body ?? undefined);
    });
  }

  private async post<T>(endpoint: string, body: Record<string, unknown>, output: z.ZodType<T>, limits: RequestLimits = {}): Promise<T> {
    const reply = await this.raw('POST', endpoint, JSON.stringify(body), limits);
    const text = reply.body.toString('utf8');
    if (reply.status !== 200) {
      throw new AppWorldServerError(`AppWorld server: POST ${endpoint} answered HTTP ${reply.status}: ${text.slice(0, 500)}`);
    }
    if (reply.cut)
      throw new AppWorldServerError(`AppWorld server: POST ${endpoint}'s reply is over ${limits.maxBytes ?? this.maxReplyBytes} bytes`);
    return parseOutput(endpoint, text, output);
  }

  /** Loads the task's world (replacing whatever the server held). */
  initialize(taskId: string, options: InitializeOptions, signal?: AbortSignal): Promise<InitializeOutput> {
    return this.post(
      '/initialize',
      {
        task_id: taskId,
        experiment_name: options.experimentName,
        ...(options.timeoutSeconds !== undefined ? { timeout_seconds: options.timeoutSeconds } : {}),
        ...(options.randomSeed !== undefined ? { random_seed: options.randomSeed } : {}),
        ...(options.loadGroundTruth !== undefined ? { load_ground_truth: options.loadGroundTruth } : {}),
      },
      InitializeOutput,
      { signal },
    );
  }

  /** Runs Python code in the world; what it printed (or the traceback) comes back, its start only when over `limits.maxBytes`. */
  async execute(taskId: string, code: string, limits: RequestLimits = {}): Promise<ExecuteReply> {
    const reply = await this.raw('POST', '/execute', JSON.stringify({ task_id: taskId, code }), limits);
    const text = reply.body.toString('utf8');
    if (reply.cut) return { output: outputPrefix(text), cut: true };
    if (reply.status !== 200)
      throw new AppWorldServerError(`AppWorld server: POST /execute answered HTTP ${reply.status}: ${text.slice(0, 500)}`);
    return { output: parseOutput('/execute', text, z.string()), cut: false };
  }

  /** Has the agent called apis.supervisor.complete_task? */
  taskCompleted(taskId: string, signal?: AbortSignal): Promise<boolean> {
    return this.post('/task_completed', { task_id: taskId }, z.boolean(), { signal });
  }

  /** The task's checks against the world as it is now, by a server that loaded the ground truth (the env evaluates elsewhere: servers.ts). */
  evaluate(taskId: string, signal?: AbortSignal): Promise<EvaluateOutput> {
    return this.post('/evaluate', { task_id: taskId, suppress_errors: true, report: false }, EvaluateOutput, { signal });
  }

  close(taskId: string, signal?: AbortSignal): Promise<null> {
    return this.post('/close', { task_id: taskId }, z.null(), { signal });
  }

  /** The server is up (GET / answers 200). */
  async alive(): Promise<boolean> {
    try {
      return (await this.raw('GET', '/', null, { timeoutMs: 2000 })).status === 200;
    } catch {
      return false;
    }
  }
}

/** A reply's `output`, checked against what the protocol says. */
export function parseOutput<T>(what: string, text: string, output: z.ZodType<T>): T {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw new AppWorldServerError(`AppWorld ${what}: the reply is not JSON: ${text.slice(0, 200)}`);
  }
  const parsed = z.object({ output: output }).safeParse(json);
  if (!parsed.success) {
    throw new AppWorldServerError(`AppWorld ${what}: the reply is not what the protocol says:\n${formatZodError(parsed.error)}`);
  }
  return parsed.data.output;
}
