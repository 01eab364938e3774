/** The OpenEnv env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, oneHarnessSource } from '../config-parts';

export const OPENENV_KIND = 'openenv';

const ServerUrl = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL such as http://127.0.0.1:8000' });

/** A server already running: its URL and how many sessions (episodes) it takes at once. */
const RemoteServer = z.strictObject({
  url: ServerUrl,
  /** Episodes this server runs at once (its max_concurrent_envs, or fewer). */
  sessions: z.number().int().positive().max(256).default(1),
});

/** Servers the workers start themselves, each in a sandbox with no network: the shipped keypad env, or an app of your own. */
const LocalServers = z.strictObject({
  /** A folder holding the app's Python module (mounted read-only in the sandbox); the shipped keypad env's when absent. */
  appDir: z.string().min(1).optional(),
  /** The ASGI app, as uvicorn names it: module:attribute (keypad_env:app for the shipped env). */
  app: z
    .string()
    .regex(/^[A-Za-z_][\w.]*:[A-Za-z_]\w*$/, 'module:attribute, e.g. keypad_env:app')
    .optional(),
  /** Servers per worker. */
  instances: z.number().int().positive().max(16).default(1),
  /** Episodes per server at once (the server's max_concurrent_envs is set to it). */
  sessions: z.number().int().positive().max(64).default(4),
});

export const OpenEnvEnvConfig = z
  .strictObject({
    kind: z.literal(OPENENV_KIND),
    /** Servers already running, by URL; when absent, the workers start `local` servers themselves. */
    servers: z.array(RemoteServer).min(1).optional(),
    local: LocalServers.prefault({}),
    /** A task file: {"tasks": [{"id", "kind", "prompt"?, "reset": {...}}]}; the shipped keypad tasks when absent. */
    tasks: z.string().min(1).optional(),
    /**
     * How the policy acts. `text`: its reply goes into the action's `actionField`.
     * `tools`: the env is an MCP env (openenv's MCPEnvironment); its tools are
     * offered as function calls, and each call is sent as a `call_tool` action.
     */
    actions: z.enum(['text', 'tools']).default('text'),
    /** The action's field the policy's reply goes into (`{"message": reply}`), when `actions` is text. */
    actionField: z.string().min(1).default('message'),
    /** The observation's field shown to the policy; when absent: `text`, `prompt` or `message` if it is a string, else the observation as JSON. */
    observationField: z.string().min(1).optional(),
    /** An episode succeeds when its final reward is at least this. */
    successReward: z.number().default(0.9),
    /** Seconds one reset or step may take; past it the session is closed and the episode ends as an execution error. */
    stepSeconds: z.number().positive().max(3600).default(30),
    /** A folder of harness spec files (base + siblings); the shipped keypad pool when absent. */
    harnessDir: z.string().min(1).optional(),
    /** A frozen pool (by its hash) in place of the shipped or harnessDir pool. */
    pool: FrozenPoolHash,
  })
  .superRefine(oneHarnessSource)
  .superRefine((env, ctx) => {
    if (env.servers !== undefined && (env.local.appDir !== undefined || env.local.app !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        path: ['local'],
        message: 'name either servers already running (servers) or an app the workers start (local), not both',
      });
    }
    if ((env.local.appDir === undefined) !== (env.local.app === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['local'], message: 'a local app needs both appDir (its folder) and app (module:attribute)' });
    }
  });
export type OpenEnvEnvConfig = z.infer<typeof OpenEnvEnvConfig>;
