/**
 * A real OpenAI-compatible HTTP server for voter LLMs: it answers
 * /v1/chat/completions by model name as scripted (a ballot, prose, an HTTP
 * error, a late answer), and records every request.
 */
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface VoterAnswer {
  /** HTTP status; 200 when absent. */
  status?: number;
  /** The assistant's content on 200. */
  content?: string;
  /** The error message on another status. */
  error?: string;
  /** Answer this late (the client may give up first). */
  delayMs?: number;
}

export interface VoterServer {
  baseUrl: string;
  requests: Array<{ model: string; temperature: unknown; messages: Array<{ role: string; content: string }> }>;
  close(): Promise<void>;
}

const chatCompletion = (model: string, content: string) => ({
  id: `chatcmpl-${model}`,
  object: 'chat.completion',
  created: Math.floor(Date.now() / 1000),
  model,
  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }],
});

/** `requireKey`: answer 401 unless the request carries `Authorization: Bearer <requireKey>`. */
export async function startVoterServer(answers: Record<string, VoterAnswer>, options: { requireKey?: string } = {}): Promise<VoterServer> {
  const requests: VoterServer['requests'] = [];
  const pending = new Set<NodeJS.Timeout>();
  const sendJson = (res: ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
  const answer = (req: IncomingMessage, res: ServerResponse, body: string) => {
    if (req.method !== 'POST' || req.url !== '/v1/chat/completions') {
      return sendJson(res, 404, { error: { message: `no route ${req.method} ${req.url}`, type: 'NotFoundError', code: 404 } });
    }
    if (options.requireKey !== undefined && req.headers.authorization !== `Bearer ${options.requireKey}`) {
      return sendJson(res, 401, { error: { message: 'invalid API key', type: 'AuthenticationError', code: 401 } });
    }
    const json = JSON.parse(body) as VoterServer['requests'][number];
    requests.push({ model: json.model, temperature: json.temperature, messages: json.messages });
    const scripted = answers[json.model];
    if (!scripted)
      return sendJson(res, 404, { error: { message: `The model \`${json.model}\` does not exist.`, type: 'NotFoundError', code: 404 } });
    const send = () => {
      const status = scripted.status ?? 200;
      if (status === 200) sendJson(res, 200, chatCompletion(json.model, scripted.content ?? ''));
      else sendJson(res, status, { error: { message: scripted.error ?? 'error', type: 'Error', code: status } });
    };
    if (!scripted.delayMs) return send();
    const timer = setTimeout(() => {
      pending.delete(timer);
      send();
    }, scripted.delayMs);
    pending.add(timer);
    // The client may give up first; stop the timer so nothing outlives the test.
    res.on('close', () => {
      clearTimeout(timer);
      pending.delete(timer);
    });
  };
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => answer(req, res, body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve, reject) => {
        for (const timer of pending) clearTimeout(timer);
        pending.clear();
        server.close((err) => (err ? reject(err) : resolve()));
        server.closeAllConnections();
      }),
  };
}
