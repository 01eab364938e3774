/**
 * The metrics server's port ($HARNESS_S_METRICS_PORT) and what it serves
 * without a Temporal runtime behind it.
 */
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { recordStepMetrics } from '../../core/metrics';
import { metricsPortFromEnv, startMetricsServer, type MetricsServer } from '../../workers/metrics-server';

const servers: MetricsServer[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => s.close()));
});

function occupyPort(): Promise<net.Server> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.listen(0, () => resolve(server));
  });
}

test('HARNESS_S_METRICS_PORT defaults to 9464, takes a port, and turns metrics off with off or 0', () => {
  expect(metricsPortFromEnv({})).toBe(9464);
  expect(metricsPortFromEnv({ HARNESS_S_METRICS_PORT: '9100' })).toBe(9100);
  expect(metricsPortFromEnv({ HARNESS_S_METRICS_PORT: 'off' })).toBeNull();
  expect(metricsPortFromEnv({ HARNESS_S_METRICS_PORT: '0' })).toBeNull();
});

test('a HARNESS_S_METRICS_PORT that is not a port is refused, naming the variable', () => {
  expect(() => metricsPortFromEnv({ HARNESS_S_METRICS_PORT: 'ninety' })).toThrow(/HARNESS_S_METRICS_PORT='ninety' is not a port/);
});

test('a port already in use fails with an error naming HARNESS_S_METRICS_PORT and what to do', async () => {
  const taken = await occupyPort();
  try {
    const port = (taken.address() as AddressInfo).port;
    await expect(startMetricsServer({ port })).rejects.toThrow(
      new RegExp(`port ${port} \\(HARNESS_S_METRICS_PORT\\) is already in use.*set HARNESS_S_METRICS_PORT to a free port`),
    );
  } finally {
    taken.close();
  }
});

test("/metrics serves the project's metrics, and says so when the Temporal SDK's exporter does not answer", async () => {
  const free = await occupyPort();
  const port = (free.address() as AddressInfo).port;
  await new Promise((resolve) => free.close(resolve));
  const server = await startMetricsServer({ port, host: '127.0.0.1' });
  servers.push(server);
  recordStepMetrics('unit', { deadGroups: 3, rescuedGroups: 2, phaseSeconds: { rollout: 4, train: 1, publish: 0.5 }, failedGroups: [] });

  const response = await fetch(`http://127.0.0.1:${server.port}/metrics`);
  const text = await response.text();
  expect(response.status).toBe(200);
  expect(text).toContain('harness_s_dead_groups_total{env="unit"} 3');
  expect(text).toContain('harness_s_rescued_groups_total{env="unit"} 2');
  expect(text).toContain('harness_s_step_phase_seconds_count{env="unit",phase="train"} 1');
  expect(text).toContain('# Temporal SDK metrics unavailable');
  expect((await fetch(`http://127.0.0.1:${server.port}/other`)).status).toBe(404);
});
