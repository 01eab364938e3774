/**
 * A client of the OpenEnv protocol (the `openenv` package, 0.10): HTTP for
 * health and the Task API, and one WebSocket session (`/ws`) per episode,
 * in which the server keeps the episode's environment. Messages are JSON:
 * `{"type": "reset", "data": {...}}`, `{"type": "step", "data": <action>}`,
 * `{"type": "state"}`, `{"type": "close"}`; the server answers
 * `{"type": "observation", "data": {"observation", "reward", "done", "metadata"}}`,
 * `{"type": "state", "data": ...}` or `{"type": "error", "data": {"message", "code"}}`.
 *
 * A server is reached by URL (http://host:port) or through a unix socket
 * (the servers the workers start in a sandbox have no network).
 */
import http from 'node:http';
import { z } from 'zod';
import WebSocket from 'ws';
import { UserError } from '../../errors';

/** Where a server listens: a URL, or a unix socket (the URL's host is then only a label). */
export type OpenEnvAddress = { url: string } | { socket: string };

export class OpenEnvError extends UserError {
  override name = 'OpenEnvError';
}

/**
 * The server cannot be reached (refused, reset, timed out while connecting).
 * Not a user error: a server that is down for a while is an outage, which
 * the activity's retries ride out and, past them, pauses the run.
 */
export class OpenEnvUnavailableError extends Error {
  override name = 'OpenEnvUnavailableError';
}

/** The server answered, but not in the protocol (or with an error message of its own). */
export class OpenEnvProtocolError extends OpenEnvError {
  override name = 'OpenEnvProtocolError';
  constructor(
    message: string,
    /** The server's error code (VALIDATION_ERROR, EXECUTION_ERROR, CAPACITY_REACHED, ...) when it sent one. */
    readonly code?: string,
  ) {
    super(message);
  }
}

/** A reset or step took longer than allowed. */
export class OpenEnvTimeoutError extends OpenEnvUnavailableError {
  override name = 'OpenEnvTimeoutError';
}

const StepResult = z.object({
  observation: z.record(z.string(), z.unknown()),
  reward: z.number().nullable().optional(),
  done: z.boolean(),
  metadata: z.record(z.string(), z.unknown()).nullable().optional(),
});
export type OpenEnvStepResult = z.infer<typeof StepResult>;

/** A tool as an MCP env lists it (`list_tools` action: openenv's ListToolsObservation). */
const OpenEnvTool = z.object({
  name: z.string().min(1),
  description: z.string().default(''),
  input_schema: z.record(z.string(), z.unknown()).default({ type: 'object', properties: {} }),
});
export type OpenEnvTool = z.infer<typeof OpenEnvTool>;

const ServerMessage = z.discriminatedUnion('type', [
  z.object({ type: z.literal('observation'), data: z.unknown() }),
  z.object({ type: z.literal('state'), data: z.record(z.string(), z.unknown()) }),
  z.object({ type: z.literal('error'), data: z.object({ message: z.string().optional(), code: z.string().optional() }).passthrough() }),
]);

const short = (text: string, max = 300) => (text.length > max ? `${text.slice(0, max)}…` : text);

export function describeAddress(address: OpenEnvAddress): string {
  return 'url' in address ? address.url : `unix:${address.socket}`;
}

/** One HTTP request to the server; the body parsed as JSON. */
export async function openEnvRequest(
  address: OpenEnvAddress,
  method: 'GET' | 'POST',
  path: string,
  body?: unknown,
  timeoutMs = 10_000,
): Promise<unknown> {
  const where = `${describeAddress(address)}${path}`;
  const payload = body === undefined ? undefined : JSON.stringify(body);
  const base = 'url' in address ? new URL(address.url) : null;
  const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
    const request = http.request(
      {
        ...(base
          ? { hostname: base.hostname, port: base.port || 80, path: `${base.pathname.replace(/\/$/, '')}${path}` }
          : { socketPath: (address as { socket: string }).socket, path }),
        method,
        headers: payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
        timeout: timeoutMs,
      },
      (response) => {
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
        response.on('error', reject);
      },
    );
    request.on('timeout', () =>
      request.destroy(new OpenEnvTimeoutError(`OpenEnv server ${where}: no answer within ${timeoutMs / 1000} s`)),
    );
    request.on('error', (err) =>
      reject(err instanceof OpenEnvError ? err : new OpenEnvUnavailableError(`OpenEnv server ${where} is unreachable: ${err.message}`)),
    );
    request.end(payload);
  });
  if (status < 200 || status >= 300) throw new OpenEnvProtocolError(`OpenEnv server ${where}: HTTP ${status}: ${short(text)}`);
  try {
    return JSON.parse(text);
  } catch {
    throw new OpenEnvProtocolError(`OpenEnv server ${where}: the answer is not JSON: ${short(text)}`);
  }
}

/** Whether the server answers its health check as healthy. */
export async function openEnvHealthy(address: OpenEnvAddress, timeoutMs = 2_000): Promise<boolean> {
  try {
    const answer = await openEnvRequest(address, 'GET', '/health', undefined, timeoutMs);
    return (answer as { status?: unknown })?.status === 'healthy';
  } catch {
    return false;
  }
}

/** The Task API: the env's name, then its tasks of a split, as the server describes them. */
export async function openEnvTasks(address: OpenEnvAddress, split: string): Promise<{ envName: string; tasks: unknown[] }> {
  const names = z
    .array(z.string())
    .min(1)
    .safeParse(await openEnvRequest(address, 'GET', '/list_environments'));
  if (!names.success)
    throw new OpenEnvProtocolError(`OpenEnv server ${describeAddress(address)}/list_environments: expected a list of env names`);
  const envName = names.data[0];
  const listed = z
    .object({ tasks: z.array(z.unknown()) })
    .safeParse(await openEnvRequest(address, 'POST', `/${encodeURIComponent(envName)}/tasks`, { split }));
  if (!listed.success)
    throw new OpenEnvProtocolError(`OpenEnv server ${describeAddress(address)}/${envName}/tasks: expected {"tasks": [...]}`);
  return { envName, tasks: listed.data.tasks };
}

/**
 * One episode's session: a WebSocket in which the server keeps its own
 * environment instance. Requests go one at a time; each has `timeoutMs`.
 * The session closes on `close()`, on a timeout, and when `signal` aborts.
 */
export class OpenEnvSession {
  private pending: { resolve: (message: unknown) => void; reject: (err: Error) => void } | null = null;
  /** A message that came before anything was asked (a server that is full says so as soon as the session opens). */
  private unsolicited: string | null = null;
  private closedWith: Error | null = null;

  private constructor(
    private readonly socket: WebSocket,
    private readonly where: string,
    private readonly timeoutMs: number,
  ) {
    socket.on('message', (data) => this.received(data.toString()));
    socket.on('close', () => this.fail(new OpenEnvUnavailableError(`OpenEnv session at ${this.where} was closed by the server`)));
    socket.on('error', (err) => this.fail(new OpenEnvUnavailableError(`OpenEnv session at ${this.where}: ${err.message}`)));
  }

  static async open(address: OpenEnvAddress, options: { timeoutMs: number; signal?: AbortSignal }): Promise<OpenEnvSession> {
    const where = `${describeAddress(address)}/ws`;
    const url = 'url' in address ? `${address.url.replace(/^http/, 'ws').replace(/\/$/, '')}/ws` : `ws+unix://${address.socket}:/ws`;
    const socket = new WebSocket(url, { handshakeTimeout: options.timeoutMs });
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', (err) => reject(new OpenEnvUnavailableError(`OpenEnv server ${where} is unreachable: ${err.message}`)));
      socket.once('unexpected-response', (_req, res) =>
        reject(new OpenEnvProtocolError(`OpenEnv server ${where}: HTTP ${res.statusCode} instead of a WebSocket session`)),
      );
    });
    const session = new OpenEnvSession(socket, where, options.timeoutMs);
    options.signal?.addEventListener('abort', () => void session.close(), { once: true });
    return session;
  }

  /** Starts the episode; `data` is passed to the env's reset (task_id, or split and index, seed, ...). */
  async reset(data: Record<string, unknown>): Promise<OpenEnvStepResult> {
    return this.result('reset', await this.request({ type: 'reset', data }));
  }

  async step(action: Record<string, unknown>): Promise<OpenEnvStepResult> {
    return this.result('step', await this.request({ type: 'step', data: action }));
  }

  /** The tools of an MCP env: the `list_tools` action, answered with the tools and their input schemas. */
  async listTools(): Promise<OpenEnvTool[]> {
    const result = await this.step({ type: 'list_tools' });
    const tools = z.array(OpenEnvTool).safeParse(result.observation.tools);
    if (!tools.success) {
      const issue = tools.error.issues[0];
      throw new OpenEnvProtocolError(
        `OpenEnv session at ${this.where}: malformed tool list after list_tools: tools.${issue.path.join('.')}: ${issue.message} (got ${short(JSON.stringify(result.observation))})`,
      );
    }
    return tools.data;
  }

  async state(): Promise<Record<string, unknown>> {
    const message = await this.request({ type: 'state' });
    if (message.type !== 'state')
      throw new OpenEnvProtocolError(`OpenEnv session at ${this.where}: a state request was answered with '${message.type}'`);
    return message.data as Record<string, unknown>;
  }

  /**
   * Ends the session: the protocol's close message, after which the server
   * drops the session's environment and closes the socket. Resolves once it
   * has (so the session no longer counts against the server's limit); a
   * server that does not close within a second is closed on, and cut off
   * after two. Safe to call twice.
   */
  close(): Promise<void> {
    if (this.socket.readyState === WebSocket.OPEN) this.socket.send(JSON.stringify({ type: 'close' }));
    this.fail(new OpenEnvError(`OpenEnv session at ${this.where} is closed`));
    if (this.socket.readyState === WebSocket.CLOSED) return Promise.resolve();
    return new Promise<void>((resolve) => {
      const closing = setTimeout(() => this.socket.close(), 1_000);
      const cutting = setTimeout(() => this.socket.terminate(), 2_000);
      this.socket.once('close', () => {
        clearTimeout(closing);
        clearTimeout(cutting);
        resolve();
      });
    });
  }

  get open(): boolean {
    return this.closedWith === null;
  }

  private result(what: string, message: z.infer<typeof ServerMessage>): OpenEnvStepResult {
    if (message.type !== 'observation')
      throw new OpenEnvProtocolError(`OpenEnv session at ${this.where}: a ${what} was answered with '${message.type}'`);
    const parsed = StepResult.safeParse(message.data);
    if (!parsed.success) {
      const issue = parsed.error.issues[0];
      throw new OpenEnvProtocolError(
        `OpenEnv session at ${this.where}: malformed observation after ${what}: ${issue.path.join('.') || '(root)'}: ${issue.message} (got ${short(JSON.stringify(message.data))})`,
      );
    }
    return parsed.data;
  }

  private request(message: Record<string, unknown>): Promise<z.infer<typeof ServerMessage>> {
    if (this.closedWith && this.unsolicited === null) return Promise.reject(this.closedWith);
    if (this.pending) return Promise.reject(new Error(`OpenEnv session at ${this.where}: one request at a time`));
    return new Promise<unknown>((resolve, reject) => {
      if (this.unsolicited !== null) {
        const text = this.unsolicited;
        this.unsolicited = null;
        this.pending = { resolve, reject };
        this.received(text);
        return;
      }
      const timer = setTimeout(() => {
        const err = new OpenEnvTimeoutError(
          `OpenEnv session at ${this.where}: no answer to ${String(message.type)} within ${this.timeoutMs / 1000} s; the session was closed`,
        );
        this.pending = null;
        reject(err);
        void this.close();
      }, this.timeoutMs);
      this.pending = {
        resolve: (answer) => {
          clearTimeout(timer);
          resolve(answer);
        },
        reject: (err) => {
          clearTimeout(timer);
          reject(err);
        },
      };
      this.socket.send(JSON.stringify(message));
    }).then((raw) => {
      const parsed = ServerMessage.safeParse(raw);
      if (!parsed.success)
        throw new OpenEnvProtocolError(`OpenEnv session at ${this.where}: not a protocol message: ${short(JSON.stringify(raw))}`);
      if (parsed.data.type === 'error') {
        const { message: text, code } = parsed.data.data;
        throw new OpenEnvProtocolError(
          `OpenEnv server at ${this.where} refused ${String(message.type)}: ${code ?? 'ERROR'}: ${short(text ?? JSON.stringify(parsed.data.data))}`,
          code,
        );
      }
      return parsed.data;
    });
  }

  private received(text: string): void {
    const pending = this.pending;
    if (!pending) {
      this.unsolicited ??= text;
      return;
    }
    this.pending = null;
    let message: unknown;
    try {
      message = JSON.parse(text);
    } catch {
      pending.reject(new OpenEnvProtocolError(`OpenEnv session at ${this.where}: the answer is not JSON: ${short(text)}`));
      return;
    }
    pending.resolve(message);
  }

  private fail(err: Error): void {
    if (!this.closedWith) this.closedWith = err;
    const pending = this.pending;
    this.pending = null;
    pending?.reject(err);
  }
}
