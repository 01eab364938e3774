/**
 * The bench's SIMULATED clusters: one with no latency (the overhead
 * measurement) and one per latency profile, each on a free port, and the
 * latency model's HTTP report (GET /sim/latency, POST /sim/latency/reset).
 */
import { mkdtempSync } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { z } from 'zod';
import type { SimWorld } from '../../core/envs/sim/world';
import { loadLatencyProfiles } from '../../core/latency-profiles';
import { startSimCluster, type SimCluster } from '../../sim-cluster/server';

/** The latency profiles the sim cluster ships with, by name (a bad profiles file fails here, naming what is wrong). */
export function latencyProfileNames(): string[] {
  return Object.keys(loadLatencyProfiles());
}

/** A sim cluster on a free port with its own state folder under `dataDir`; with `latency`, the latency model on. */
export function startBenchCluster(options: {
  world: SimWorld;
  dataDir: string;
  logger: Logger;
  latency?: { profile: string; speedup: number };
}): Promise<SimCluster> {
  return startSimCluster({
    world: options.world,
    dataDir: mkdtempSync(path.join(options.dataDir, `sim-${options.latency?.profile ?? 'zero'}-`)),
    port: 0,
    logger: options.logger,
    latency: options.latency,
  });
}

const LatencyReport = z.object({
  simulated: z.literal(true),
  enabled: z.literal(true),
  profile: z.string(),
  speedup: z.number().positive(),
  tokenScale: z.number().positive().optional(),
  simulatedSeconds: z.number().positive(),
  inference: z.object({ busySeconds: z.number().min(0), requests: z.number() }),
  trainer: z.object({ busySeconds: z.number().min(0), ops: z.number(), tokens: z.number().optional() }),
});
export type LatencyReport = z.infer<typeof LatencyReport>;

/** The latency model's report since its last reset; null when the cluster has none (no such route, or `enabled: false`). */
export async function readLatency(simUrl: string): Promise<LatencyReport | null> {
  const res = await fetch(`${simUrl}/sim/latency`);
  if (res.status === 404) return null;
  if (!res.ok) throw new Error(`[SIMULATED] GET ${simUrl}/sim/latency answered HTTP ${res.status}`);
  const body = (await res.json()) as { enabled?: boolean };
  if (body.enabled !== true) return null;
  const parsed = LatencyReport.safeParse(body);
  if (!parsed.success) throw new Error(`[SIMULATED] GET ${simUrl}/sim/latency: unexpected report: ${parsed.error.message}`);
  return parsed.data;
}

/** Zeroes the latency model's accounting and restarts its clock; false when the cluster has no latency model. */
export async function resetLatency(simUrl: string): Promise<boolean> {
  const res = await fetch(`${simUrl}/sim/latency/reset`, { method: 'POST' });
  if (res.status === 404) return false;
  if (!res.ok) throw new Error(`[SIMULATED] POST ${simUrl}/sim/latency/reset answered HTTP ${res.status}`);
  return ((await res.json()) as { enabled?: boolean }).enabled === true;
}
