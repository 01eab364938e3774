/**
 * A Tinker-compatible test trainer for runs whose policy is scripted (not
 * the sim's): the wire protocol of core/trainer/tinker/wire.ts (sessions,
 * protobuf forward_backward, seq_id exactly-once, save_weights_for_sampler
 * with an archive download, save_weights of the training state), recording every Datum it receives so tests can
 * check them. It trains nothing: forward_backward answers the sampling
 * log-probs back (no mismatch), and a forward pass answers SCRIPTED_LOGPROB,
 * which the scripted policy server also answers to prompt_logprobs, so the
 * publish probe agrees. Futures resolve on the second poll, so clients poll.
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { create as createTar } from 'tar';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import {
  decodeForwardBackwardRequest,
  encodeForwardBackwardResult,
  PROTOBUF_CONTENT_TYPE,
  type WireDatum,
} from '../../core/trainer/tinker/wire';
import { SCRIPTED_LOGPROB } from './scripted-policy-server';

export interface RecordingTrainer {
  url: string;
  datums: WireDatum[];
  optimSteps: number;
  close(): Promise<void>;
}

type Result = { json: unknown } | { proto: Uint8Array };

export async function startRecordingTrainer(): Promise<RecordingTrainer> {
  const futures = new Map<string, { result: Result; polled: boolean }>();
  const seqs = new Map<string, string>();
  const checkpoints = new Set<string>();
  const trainingStates = new Set<string>();
  const state: RecordingTrainer = { url: '', datums: [], optimSteps: 0, close: async () => undefined };
  const archiveDir = mkdtempSync(path.join(os.tmpdir(), 'recording-trainer-'));
  writeFileSync(path.join(archiveDir, 'adapter_config.json'), JSON.stringify({ peft_type: 'LORA', r: 8, recording: true }));
  const archive = path.join(os.tmpdir(), `${path.basename(archiveDir)}.tar.gz`);
  await createTar({ gzip: true, file: archive, cwd: archiveDir }, ['adapter_config.json']);
  let next = 0;

  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const send = (status: number, value: unknown, headers: Record<string, string> = {}) => {
        if (value instanceof Uint8Array) {
          res.writeHead(status, { 'content-type': PROTOBUF_CONTENT_TYPE, ...headers });
          return res.end(value);
        }
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(value));
      };
      const future = (seqKey: string | null, result: Result) => {
        const known = seqKey ? seqs.get(seqKey) : undefined;
        const requestId = known ?? `req-${next++}`;
        if (!known) futures.set(requestId, { result, polled: false });
        if (seqKey) seqs.set(seqKey, requestId);
        send(200, { request_id: requestId, model_id: 'recording-model' });
      };
      const url = req.url ?? '';
      if (req.method === 'GET') {
        const archiveRoute = /\/checkpoints\/([^/]+)\/(archive|download)$/.exec(url);
        if (archiveRoute && checkpoints.has(archiveRoute[1])) {
          if (archiveRoute[2] === 'archive')
            return send(302, {}, { location: `http://${req.headers.host}${url.replace(/archive$/, 'download')}` });
          res.writeHead(200, { 'content-type': 'application/octet-stream' });
          return res.end(readFileSync(archive));
        }
        return send(404, { detail: `no route ${url}` });
      }
      const op = url.replace('/api/v1/', '');
      const json = req.headers['content-type']?.startsWith('application/json') && raw.length ? JSON.parse(raw.toString('utf8')) : {};
      if (op === 'create_session') return send(200, { session_id: 'recording-session' });
      if (op === 'session_heartbeat') return send(200, { type: 'session_heartbeat' });
      if (op === 'retrieve_future') {
        const f = futures.get(json.request_id);
        if (!f) return send(404, { detail: 'Future not found' });
        if (!f.polled) {
          f.polled = true;
          return send(408, { detail: 'Timeout waiting for result' });
        }
        return 'proto' in f.result ? send(200, f.result.proto) : send(200, f.result.json);
      }
      if (op === 'create_model') {
        if (!json.session_id) return send(422, { detail: [{ loc: ['body', 'session_id'], msg: 'Field required' }] });
        return future(null, { json: { model_id: 'recording-model' } });
      }
      if (op === 'forward_backward') {
        if (req.headers['content-type'] !== PROTOBUF_CONTENT_TYPE)
          return send(415, { detail: 'forward_backward requires a protobuf body' });
        const body = decodeForwardBackwardRequest(raw);
        if (!body.forward_only && !seqs.has(`fb/${body.seq_id}`)) state.datums.push(...body.data);
        const outputs = body.data.map((d) => ({
          logprobs: {
            data: body.forward_only ? d.loss_fn_inputs.target_tokens.data.map(() => SCRIPTED_LOGPROB) : d.loss_fn_inputs.logprobs.data,
            dtype: 'float32' as const,
          },
        }));
        return future(`fb/${body.seq_id}`, {
          proto: encodeForwardBackwardResult({ loss_fn_output_type: 'TensorData', loss_fn_outputs: outputs, metrics: { 'loss:sum': 0 } }),
        });
      }
      if (op === 'optim_step') {
        if (!seqs.has(`optim/${json.seq_id}`)) state.optimSteps += 1;
        return future(`optim/${json.seq_id}`, { json: { metrics: {} } });
      }
      if (op === 'save_weights_for_sampler') {
        if (checkpoints.has(json.path)) return send(409, { detail: `Checkpoint '${json.path}' already exists` });
        checkpoints.add(json.path);
        return future(null, { json: { path: `tinker://recording-model/${json.path}`, type: 'save_weights_for_sampler' } });
      }
      if (op === 'save_weights') {
        // The training state is named and acknowledged (409 when the name exists, as SkyRL); there is nothing to keep.
        if (trainingStates.has(json.path)) return send(409, { detail: `Checkpoint '${json.path}' already exists` });
        trainingStates.add(json.path);
        return future(null, { json: { path: `tinker://recording-model/weights/${json.path}`, type: 'save_weights' } });
      }
      send(404, { detail: `no op ${op}` });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  state.close = () => new Promise((resolve) => server.close(() => resolve()));
  return state;
}
