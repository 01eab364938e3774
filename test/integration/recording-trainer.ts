/**
 * A Tinker-compatible test trainer: the REST subset a training step uses,
 * recording every Datum it receives so tests can check them. Futures resolve
 * on the first poll after one "try again", so clients really poll.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Datum } from '../../core/rl/datums';

export interface RecordingTrainer {
  url: string;
  datums: Datum[];
  optimSteps: number;
  close(): Promise<void>;
}

export async function startRecordingTrainer(): Promise<RecordingTrainer> {
  const futures = new Map<string, { result: unknown; polled: boolean }>();
  const byKey = new Map<string, unknown>();
  const state: RecordingTrainer = { url: '', datums: [], optimSteps: 0, close: async () => undefined };
  let next = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const json = body ? JSON.parse(body) : {};
      const send = (status: number, value: unknown) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(value));
      };
      const op = (req.url ?? '').replace('/api/v1/', '');
      if (op === 'retrieve_future') {
        const future = futures.get(json.request_id);
        if (!future) return send(404, { detail: 'unknown request_id' });
        if (!future.polled) {
          future.polled = true;
          return send(408, { type: 'try_again', request_id: json.request_id });
        }
        return send(200, future.result);
      }
      const key = `${op}:${req.headers['idempotency-key'] ?? `none-${next}`}`;
      if (byKey.has(key)) return send(200, byKey.get(key));
      let result: unknown;
      if (op === 'create_model') result = { model_id: 'recording-model' };
      else if (op === 'forward_backward') {
        state.datums.push(...(json.forward_backward_input.data as Datum[]));
        result = { loss_fn_outputs: [], metrics: { 'loss:sum': 0 } };
      } else if (op === 'optim_step') {
        state.optimSteps += 1;
        result = { metrics: {} };
      } else if (op === 'save_weights_for_sampler') result = { path: `tinker://recording-model/sampler_weights/${json.path}` };
      else return send(404, { detail: `no op ${op}` });
      const requestId = `req-${next++}`;
      futures.set(requestId, { result, polled: false });
      const future = { request_id: requestId, model_id: 'recording-model' };
      byKey.set(key, future);
      send(200, future);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}
