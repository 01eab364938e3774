/**
 * An env joins Harness-S by registration: one object per env kind that says
 * how its config reads, how the env is built, where its harness pool is,
 * which system prompt its spec harnesses run on and, where it differs from
 * the default, which repair directions its failures call for.
 *
 * The shipped envs each register in their own folder
 * (core/envs/<kind>/registration.ts) and core/envs/registry.ts lists them;
 * a user's env registers from a module of its own (`env.kind: "module"`,
 * core/envs/module/). Workers load registrations; workflow code never does:
 * it sees only the config schemas (core/envs/env-configs.ts), which hold no
 * code that reaches outside.
 */
import type { z } from 'zod';
import type { FailureDirections } from '../evolution/failure-directions';
import type { HarnessSpace } from '../evolution/harness-space';
import type { FrozenPool } from '../harness/frozen-pool';
import type { Harness } from '../harness/harness';
import type { LoadedSpec } from '../harness/spec';
import type { Settings } from '../settings';
import type { Environment } from '../harness/environment';
import type { SharedSessionLeases } from './session-leases';

/** What every env config has: its kind, and where its harnesses come from when not the shipped pool. */
export interface EnvConfigBase {
  kind: string;
  /** A folder of harness files in place of the env's shipped pool. */
  harnessDir?: string;
  /** A frozen pool, by its hash, in place of the env's shipped pool. */
  pool?: string;
}

/** A server an env talks to or starts (for `config check`'s list of endpoints): where in the config, its address (no password), what it is. */
export interface EnvServer {
  path: string;
  address: string;
  note?: string;
}

/** What a worker process shares with every env it builds, beside its settings. */
export interface EnvServices {
  /**
   * Where the session slots of servers every host shares are counted (the
   * run store's leases); absent (the CLI's eval, the bench), each process
   * counts its own.
   */
  sessionLeases?: SharedSessionLeases;
}

/** The harness pool an env is built with: a frozen pool, the config's harnessDir, or the env's shipped folder (in that order). */
export interface EnvPool {
  /** The pool's spec files, base first, read when first asked for. */
  specs(): LoadedSpec[];
  /** The specs as runtime harnesses, on the env's system prompt (a spec's own systemPrompt replaces it). */
  harnesses(): Harness[];
  /** The frozen pool the config names, read and verified against its hash; undefined when it names none. */
  frozen(): FrozenPool | undefined;
}

export interface EnvRegistration<C extends EnvConfigBase = EnvConfigBase> {
  /** `env.kind` in a run config; also the env's id in pools, runs and reports unless `envId` says otherwise. */
  readonly kind: string;
  /** The config's schema: the same object the run config's `env` union holds, so strict configs and the JSON Schema agree. */
  readonly config: z.ZodType<C>;
  /** The registration a config really uses, when the kind only names where to find it (a module env: the module's own). */
  resolve?(config: C): AnyEnvRegistration;
  /** The env's id for a given config (a module env's own name); `kind` when absent. */
  envId?(config: C): string;
  /** The folder of harness spec files the env ships, base first; absent for an env whose harnesses are not spec files (the sim). */
  readonly poolDir?: string | ((config: C) => string);
  /** The env protocol's system prompt its spec harnesses run on ('' when the protocol opens with a user turn). */
  readonly systemPrompt: string;
  /** Failure type -> repair directions, where this env's failures mean something else than the default mapping says. */
  readonly failureDirections?: Partial<FailureDirections>;
  /**
   * Builds the env; the pool is resolved by the registry and read only when
   * the env asks for it; `settings`: the worker's, read at its start;
   * `services`: what the worker's envs share (session leases).
   */
  create(config: C, pool: EnvPool, settings: Settings, services: EnvServices): Environment;
  /**
   * The space evolution's candidates live in, when the env's harnesses are not
   * HarnessSpec files (the sim); the declarative spec space on `systemPrompt` when absent.
   */
  harnessSpace?(env: Environment): HarnessSpace;
  /** The base harness evolution starts from when the config names no base file, for an env with its own harness format. */
  baseHarness?(env: Environment): unknown;
  /** Reads a base harness file of the env's own format; a HarnessSpec file when absent. */
  readHarnessFile?(file: string): unknown;
  /** The servers a config makes the env talk to or start, as the workers will; none (the env runs inside the workers) when absent. */
  servers?(config: C): EnvServer[];
}

/** A registration of any config type, as the registry holds them. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyEnvRegistration = EnvRegistration<any>;
