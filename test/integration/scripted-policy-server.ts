/**
 * A real OpenAI-compatible HTTP server whose "model" answers from a script,
 * returning token ids and logprobs the way vLLM does (return_token_ids,
 * logprobs), with a byte-level chat template whose prompts extend turn by turn.
 * For tests of the harness runtime and of training on the exact tokens.
 */
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';

export interface ScriptedMessage {
  role: string;
  content: string;
  tool_calls?: Array<{ id: string; type: 'function'; function: { name: string; arguments: string } }>;
  tool_call_id?: string;
}

/** A reply: text, or function calls through the tools API (with optional text). */
export type ScriptedReply = string | { content?: string; calls: Array<{ name: string; arguments: unknown }> };

export type Script = (messages: ScriptedMessage[], model: string) => ScriptedReply;

const SPECIAL = { system: 256, user: 257, assistant: 258, end: 259, tool: 260 } as const;

/** The log-prob this server gives every prompt token (prompt_logprobs), as the recording trainer's forward pass does. */
export const SCRIPTED_LOGPROB = -1;

export function encodeText(text: string): number[] {
  return [...Buffer.from(text, 'utf8')];
}

/** An assistant turn's text as the model generated it: its content, then each call as `<tool_call>{...}</tool_call>` (Hermes style). */
export function assistantText(content: string, calls: ReadonlyArray<{ function: { name: string; arguments: string } }> = []): string {
  return (
    content +
    calls
      .map((c) => `<tool_call>${JSON.stringify({ name: c.function.name, arguments: JSON.parse(c.function.arguments) })}</tool_call>`)
      .join('')
  );
}

/** `<|role|>` content `<|end|>` per message, then `<|assistant|>` as the generation prompt. */
export function renderPrompt(messages: ScriptedMessage[]): number[] {
  const ids: number[] = [];
  for (const m of messages) {
    const text = m.role === 'assistant' ? assistantText(m.content ?? '', m.tool_calls) : m.content;
    ids.push(SPECIAL[m.role as keyof typeof SPECIAL] ?? SPECIAL.user, ...encodeText(text), SPECIAL.end);
  }
  ids.push(SPECIAL.assistant);
  return ids;
}

/** The completion's tokens: the reply's bytes then `<|end|>`; logprob of token i is -0.01 * (i + 1). */
export function completionTokens(content: string): { ids: number[]; logprobs: number[] } {
  const ids = [...encodeText(content), SPECIAL.end];
  return { ids, logprobs: ids.map((_, i) => -0.01 * (i + 1)) };
}

export interface ScriptedPolicyServer {
  url: string;
  requests: Array<{ model: string; messages: ScriptedMessage[]; tools?: unknown[] }>;
  loadedAdapters: string[];
  close(): Promise<void>;
}

export async function startScriptedPolicyServer(script: Script, baseModel = 'scripted-model'): Promise<ScriptedPolicyServer> {
  const requests: ScriptedPolicyServer['requests'] = [];
  const loadedAdapters: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk) => (body += chunk));
    req.on('end', () => {
      const send = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': typeof value === 'string' ? 'text/plain' : 'application/json' });
        res.end(typeof value === 'string' ? value : JSON.stringify(value));
      };
      const json = body ? JSON.parse(body) : {};
      if (req.url === '/v1/models')
        return send(200, { object: 'list', data: [baseModel, ...loadedAdapters].map((id) => ({ id, object: 'model' })) });
      if (req.url === '/v1/load_lora_adapter') {
        if (!existsSync(path.join(String(json.lora_path), 'adapter_config.json'))) {
          return send(404, {
            error: {
              message: `Loading lora ${json.lora_name} failed: No adapter found for ${json.lora_path}`,
              type: 'NotFoundError',
              code: 404,
            },
          });
        }
        if (loadedAdapters.includes(json.lora_name) && !json.load_inplace) {
          return send(400, {
            error: { message: `The lora adapter '${json.lora_name}' has already been loaded.`, type: 'InvalidUserInput', code: 400 },
          });
        }
        if (!loadedAdapters.includes(json.lora_name)) loadedAdapters.push(json.lora_name);
        return send(200, `Success: LoRA adapter '${json.lora_name}' added successfully.`);
      }
      if (req.url === '/v1/completions') {
        const prompt = json.prompt as number[];
        return send(200, {
          object: 'text_completion',
          model: json.model,
          choices: [
            {
              index: 0,
              text: '',
              finish_reason: 'length',
              prompt_logprobs: prompt.map((id, i) => (i === 0 ? null : { [id]: { logprob: SCRIPTED_LOGPROB } })),
            },
          ],
        });
      }
      if (req.url === '/v1/chat/completions') {
        if (json.model !== baseModel && !loadedAdapters.includes(json.model)) {
          return send(404, { error: { message: `The model \`${json.model}\` does not exist.`, type: 'NotFoundError', code: 404 } });
        }
        requests.push({ model: json.model, messages: json.messages, tools: json.tools });
        let content: string;
        let toolCalls: NonNullable<ScriptedMessage['tool_calls']> | undefined;
        try {
          const reply = script(json.messages, json.model);
          if (typeof reply === 'string') content = reply;
          else if (reply && Array.isArray(reply.calls)) {
            if (!json.tools?.length) throw new Error('the script called a tool, but the request offered none');
            content = reply.content ?? '';
            toolCalls = reply.calls.map((c, i) => ({
              id: `call_${requests.length}_${i}`,
              type: 'function' as const,
              function: { name: c.name, arguments: JSON.stringify(c.arguments) },
            }));
          } else throw new Error(`the script returned ${typeof reply}, not a reply`);
        } catch (err) {
          return send(500, { error: { message: `scripted policy: ${(err as Error).message}`, type: 'InternalServerError', code: 500 } });
        }
        const prompt = renderPrompt(json.messages);
        const completion = completionTokens(assistantText(content, toolCalls));
        return send(200, {
          id: `chatcmpl-${requests.length}`,
          object: 'chat.completion',
          created: 0,
          model: json.model,
          prompt_token_ids: json.return_token_ids ? prompt : undefined,
          choices: [
            {
              index: 0,
              finish_reason: toolCalls ? 'tool_calls' : 'stop',
              message: {
                role: 'assistant',
                content: toolCalls && !content ? null : content,
                ...(toolCalls ? { tool_calls: toolCalls } : {}),
              },
              token_ids: json.return_token_ids ? completion.ids : undefined,
              logprobs: json.logprobs
                ? {
                    content: completion.ids.map((id, i) => ({
                      token: `t${id}`,
                      logprob: completion.logprobs[i],
                      bytes: [],
                      top_logprobs: [],
                    })),
                  }
                : null,
            },
          ],
          usage: {
            prompt_tokens: prompt.length,
            completion_tokens: completion.ids.length,
            total_tokens: prompt.length + completion.ids.length,
          },
        });
      }
      send(404, { error: { message: `no route ${req.url}`, type: 'NotFoundError', code: 404 } });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    loadedAdapters,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
