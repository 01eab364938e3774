/**
 * A real OpenAI-compatible HTTP server for proposer LLMs: each model answers
 * its scripted contents in order (then repeats the last), or an HTTP error,
 * and every request is recorded.
 */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export type ScriptedAnswer = string | { status: number; error: string };

export interface ProposerServer {
  baseUrl: string;
  requests: Array<{ model: string; messages: Array<{ role: string; content: string }> }>;
  close(): Promise<void>;
}

export async function startProposerServer(scripts: Record<string, ScriptedAnswer[]>): Promise<ProposerServer> {
  const requests: ProposerServer['requests'] = [];
  const sendJson = (res: ServerResponse, status: number, value: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(value));
  };
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/chat/completions')
        return sendJson(res, 404, { error: { message: 'no route', code: 404 } });
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ProposerServer['requests'][number];
      const asked = requests.filter((r) => r.model === body.model).length;
      requests.push({ model: body.model, messages: body.messages });
      const script = scripts[body.model];
      if (!script) return sendJson(res, 404, { error: { message: `The model \`${body.model}\` does not exist.`, code: 404 } });
      const answer = script[Math.min(asked, script.length - 1)];
      if (typeof answer !== 'string') return sendJson(res, answer.status, { error: { message: answer.error, code: answer.status } });
      sendJson(res, 200, {
        id: `chatcmpl-${asked}`,
        object: 'chat.completion',
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message: { role: 'assistant', content: answer }, finish_reason: 'stop' }],
      });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    requests,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
