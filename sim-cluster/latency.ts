/**
 * An optional latency model for the SIMULATED cluster: it makes the sim's
 * answers take the time a GPU cluster would, so scheduling measurements on
 * the sim mean something. Off unless asked for (`--latency`, or
 * HARNESS_S_SIM_LATENCY in the embedded stack); every second it reports is
 * SIMULATED GPU time from a named profile (core/latency-profiles.ts), an
 * approximation of published figures, not a measurement of this machine.
 *
 * The simulated clock runs `speedup` times faster than real time: a wait of
 * S simulated seconds takes S / speedup real seconds, and every figure it
 * reports is real elapsed time x speedup. Ratios do not depend on speedup.
 *
 * With s = tokenScale (real tokens per sim token: a sim turn is ~3 tokens,
 * a real agent turn hundreds), in simulated seconds:
 *
 * - Inference (chat and token completions). A request goes to the least
 *   loaded of `servers` replicas; when all hold `maxSequencesPerServer`
 *   sequences it waits, first come first served. Admitted as the n-th
 *   sequence in flight on its replica (n counts itself),
 *     t = P*s / prefillTokensPerSecond + C*s * (n + h) / peakDecodeTokensPerSecond
 *   for P prompt and C completion tokens, h = halfSaturationSequences: each
 *   sequence decodes at peak / (n + h) tokens/s, so the replica's aggregate,
 *   n * peak / (n + h), rises with n and saturates at peak (continuous
 *   batching). It is the shape of memory-bound decode: a step reads the
 *   weights (W bytes) once and each sequence's KV cache (K bytes), so at
 *   bandwidth B a sequence gets B / (W + n*K) = peak / (n + h) tokens/s with
 *   peak = B/K and h = W/K. The rate is fixed at admission (real batches
 *   re-share as sequences come and go), a multi-turn prompt is prefilled whole
 *   each turn (no prefix cache), and a prefill does not slow other sequences.
 * - Trainer. forward_backward: T*s / trainTokensPerSecond for the batch's T
 *   tokens (model_input of every datum); a forward pass alone a third of that
 *   (~2 of full training's ~6 FLOPs per parameter and token); optim_step,
 *   save_weights_for_sampler and save_weights fixed costs. One modelled op
 *   at a time across all models (one trainer); other ops keep opDelayMs.
 * - Publish. load_lora_adapter: adapterLoadSeconds.
 *
 * Accounting, since start or the last reset: inference busy seconds (time
 * with at least one sequence in flight, per replica, averaged over replicas),
 * requests and sim tokens; trainer busy seconds, modelled ops and sim tokens.
 */
import { DEFAULT_LATENCY_FILE, latencyProfile, LatencyProfileError, type LatencyProfile } from '../core/latency-profiles';

/** How the cluster is asked for the model (SimClusterOptions.latency, main.ts flags, the embedded stack's env). */
export interface SimLatencyOptions {
  /** A profile name in the file. */
  profile: string;
  /** Simulated seconds per real second (>= 1; default 1). */
  speedup?: number;
  /** The profiles file; the shipped latency-profiles.json when absent. */
  file?: string;
  /** Replaces the profile's inference.servers: 1 models one replica, for a process that stands for one vLLM server. */
  servers?: number;
}

/** Simulated time: `now()` in real milliseconds, `sleep` in real milliseconds. */
export interface LatencyClock {
  now(): number;
  sleep(ms: number): Promise<void>;
}

/**
 * The global `performance` (not perf_hooks'), so test fake timers drive it.
 * A timer counts from the event loop's cached time and can fire a little
 * early by performance.now(); the rest is slept, so no wait is short.
 */
const realClock: LatencyClock = {
  now: () => performance.now(),
  sleep: (ms) =>
    new Promise((resolve) => {
      const until = performance.now() + ms;
      const check = () => {
        const left = until - performance.now();
        if (left > 0) setTimeout(check, left);
        else resolve();
      };
      setTimeout(check, ms);
    }),
};

interface Replica {
  inFlight: number;
  /** Real ms since when it has had a sequence in flight; null while idle. */
  busySince: number | null;
  busyMs: number;
}

/** An admitted sequence: its replica, and n, the sequences in flight there counting it, at admission. */
interface Slot {
  replica: Replica;
  n: number;
}

/** The JSON of GET /sim/latency with the model on. Tokens are sim tokens (x tokenScale for real ones); seconds are SIMULATED. */
export interface LatencyReport {
  simulated: true;
  enabled: true;
  profile: string;
  speedup: number;
  tokenScale: number;
  simulatedSeconds: number;
  inference: { busySeconds: number; requests: number; promptTokens: number; completionTokens: number; servers: number };
  /** Now, not since the reset: the sequences admitted on each replica, and the requests waiting for a slot. */
  admission: { inFlight: number[]; queued: number };
  trainer: { busySeconds: number; ops: number; tokens: number };
  publish: { busySeconds: number; adapterLoads: number };
}

/** Trainer ops the model times; any other keeps the trainer's opDelayMs. */
const TRAINER_OPS = new Set(['forward_backward', 'forward', 'optim_step', 'save_weights_for_sampler', 'save_weights']);

export class LatencyModel {
  readonly speedup: number;
  private readonly replicas: Replica[];
  /** Requests waiting for a free sequence slot, first come first served. */
  private readonly waiting: Array<(slot: Slot) => void> = [];
  /** One trainer: modelled ops run one at a time, whichever model they are for. */
  private trainerLane: Promise<void> = Promise.resolve();
  private startedAt: number;
  private inference = { requests: 0, promptTokens: 0, completionTokens: 0 };
  private trainer = { busyMs: 0, ops: 0, tokens: 0, busySince: null as number | null };
  private publish = { busyMs: 0, adapterLoads: 0, inProgress: 0, busySince: null as number | null };

  constructor(
    readonly profileName: string,
    readonly profile: LatencyProfile,
    speedup = 1,
    private readonly clock: LatencyClock = realClock,
  ) {
    if (!Number.isFinite(speedup) || speedup < 1)
      throw new LatencyProfileError(`[SIMULATED] latency speedup must be a number >= 1 (got ${speedup})`);
    this.speedup = speedup;
    this.replicas = Array.from({ length: profile.inference.servers }, () => ({ inFlight: 0, busySince: null, busyMs: 0 }));
    this.startedAt = clock.now();
  }

  /** The named profile of the file, with `servers` replacing its replica count; an unknown name is an error listing the known ones. */
  static fromOptions(options: SimLatencyOptions, clock?: LatencyClock): LatencyModel {
    const profile = latencyProfile(options.profile, options.file ?? DEFAULT_LATENCY_FILE);
    const { servers } = options;
    if (servers === undefined) return new LatencyModel(options.profile, profile, options.speedup ?? 1, clock);
    if (!Number.isInteger(servers) || servers < 1)
      throw new LatencyProfileError(`[SIMULATED] latency servers must be an integer >= 1 (got ${servers})`);
    return new LatencyModel(options.profile, { ...profile, inference: { ...profile.inference, servers } }, options.speedup ?? 1, clock);
  }

  /** Simulated seconds of a completion admitted as the n-th sequence in flight on its replica (n >= 1 counts it). */
  completionSeconds(promptTokens: number, completionTokens: number, n: number): number {
    const { tokenScale: s, inference: i } = this.profile;
    return (
      (promptTokens * s) / i.prefillTokensPerSecond + (completionTokens * s * (n + i.halfSaturationSequences)) / i.peakDecodeTokensPerSecond
    );
  }

  /** Simulated seconds of a trainer op over `tokens` sim tokens; undefined for ops the model does not time. */
  trainerOpSeconds(route: string, tokens = 0): number | undefined {
    const { tokenScale: s, trainer: t } = this.profile;
    switch (route) {
      case 'forward_backward':
        return (tokens * s) / t.trainTokensPerSecond;
      case 'forward':
        return (tokens * s) / t.trainTokensPerSecond / 3;
      case 'optim_step':
        return t.optimStepSeconds;
      case 'save_weights_for_sampler':
        return t.saveWeightsForSamplerSeconds;
      case 'save_weights':
        return t.saveWeightsSeconds;
      default:
        return undefined;
    }
  }

  timesTrainerOp(route: string): boolean {
    return TRAINER_OPS.has(route);
  }

  /** Resolves when a completion of these sim token counts would be done on the simulated servers. */
  async completion(promptTokens: number, completionTokens: number): Promise<void> {
    const { replica, n } = await this.admit();
    try {
      await this.wait(this.completionSeconds(promptTokens, completionTokens, n));
      this.inference.requests += 1;
      this.inference.promptTokens += promptTokens;
      this.inference.completionTokens += completionTokens;
    } finally {
      this.release(replica);
    }
  }

  /** Resolves when the trainer would have run this op, after the modelled ops before it. */
  trainerOp(route: string, tokens = 0): Promise<void> {
    const simulated = this.trainerOpSeconds(route, tokens) ?? 0;
    const run = this.trainerLane.then(async () => {
      this.trainer.busySince = this.clock.now();
      try {
        await this.wait(simulated);
      } finally {
        this.trainer.busyMs += this.clock.now() - (this.trainer.busySince ?? this.clock.now());
        this.trainer.busySince = null;
        this.trainer.ops += 1;
        this.trainer.tokens += route === 'forward_backward' || route === 'forward' ? tokens : 0;
      }
    });
    this.trainerLane = run;
    return run;
  }

  /** Resolves when the inference server would have loaded a LoRA adapter. */
  async adapterLoad(): Promise<void> {
    if (this.publish.inProgress++ === 0) this.publish.busySince = this.clock.now();
    try {
      await this.wait(this.profile.publish.adapterLoadSeconds);
      this.publish.adapterLoads += 1;
    } finally {
      if (--this.publish.inProgress === 0) {
        this.publish.busyMs += this.clock.now() - (this.publish.busySince ?? this.clock.now());
        this.publish.busySince = null;
      }
    }
  }

  report(): LatencyReport {
    const now = this.clock.now();
    const sim = (ms: number) => (ms * this.speedup) / 1000;
    const open = (since: number | null) => (since === null ? 0 : now - since);
    const replicaBusy = this.replicas.reduce((sum, r) => sum + r.busyMs + open(r.busySince), 0) / this.replicas.length;
    return {
      simulated: true,
      enabled: true,
      profile: this.profileName,
      speedup: this.speedup,
      tokenScale: this.profile.tokenScale,
      simulatedSeconds: sim(now - this.startedAt),
      inference: { busySeconds: sim(replicaBusy), ...this.inference, servers: this.replicas.length },
      trainer: { busySeconds: sim(this.trainer.busyMs + open(this.trainer.busySince)), ops: this.trainer.ops, tokens: this.trainer.tokens },
      publish: { busySeconds: sim(this.publish.busyMs + open(this.publish.busySince)), adapterLoads: this.publish.adapterLoads },
      admission: { inFlight: this.inFlight(), queued: this.queued() },
    };
  }

  /** Zeroes the accounting and restarts the simulated clock; work in flight counts from now. */
  reset(): void {
    const now = this.clock.now();
    this.startedAt = now;
    for (const r of this.replicas) {
      r.busyMs = 0;
      if (r.busySince !== null) r.busySince = now;
    }
    this.inference = { requests: 0, promptTokens: 0, completionTokens: 0 };
    this.trainer = { busyMs: 0, ops: 0, tokens: 0, busySince: this.trainer.busySince === null ? null : now };
    this.publish = { ...this.publish, busyMs: 0, adapterLoads: 0, busySince: this.publish.busySince === null ? null : now };
  }

  /** Sequences in flight per replica, for tests and the bench. */
  inFlight(): number[] {
    return this.replicas.map((r) => r.inFlight);
  }

  /** Requests waiting for a sequence slot. */
  queued(): number {
    return this.waiting.length;
  }

  private wait(simulatedSeconds: number): Promise<void> {
    return this.clock.sleep((simulatedSeconds * 1000) / this.speedup);
  }

  /** A sequence slot on the least loaded replica, at once or when one frees up. */
  private admit(): Promise<Slot> {
    const replica = this.replicas.reduce((a, b) => (b.inFlight < a.inFlight ? b : a));
    if (this.waiting.length === 0 && replica.inFlight < this.profile.inference.maxSequencesPerServer) {
      if (replica.inFlight === 0) replica.busySince = this.clock.now();
      replica.inFlight += 1;
      return Promise.resolve({ replica, n: replica.inFlight });
    }
    return new Promise((resolve) => this.waiting.push(resolve));
  }

  /** A finished sequence's slot goes straight to the first waiting request, else the replica frees it. */
  private release(replica: Replica): void {
    const next = this.waiting.shift();
    if (next) {
      next({ replica, n: replica.inFlight });
      return;
    }
    if (--replica.inFlight === 0) {
      replica.busyMs += this.clock.now() - (replica.busySince ?? this.clock.now());
      replica.busySince = null;
    }
  }
}
