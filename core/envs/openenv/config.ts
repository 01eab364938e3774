/** The OpenEnv env's config (workflow-safe: the run config's `env` union holds it). */
import { z } from 'zod';
import { FrozenPoolHash, HarnessDir, oneHarnessSource } from '../config-parts';

export const OPENENV_KIND = 'openenv';

const ServerUrl = z.url({ protocol: /^https?$/, message: 'must be an absolute http(s) URL such as http://127.0.0.1:8000' });

/** A server already running: its URL and how many sessions (episodes) it takes at once. */
const RemoteServer = z
  .strictObject({
    url: ServerUrl.describe("The OpenEnv server's http(s) URL, as the workers reach it."),
    sessions: z
      .number()
      .int()
      .positive()
      .max(256)
      .default(1)
      .describe('Episodes this server runs at once (its max_concurrent_envs, or fewer).'),
  })
  .describe('An OpenEnv server already running.');

/** Servers the workers start themselves, each in a sandbox with no network: the shipped keypad env, or an app of your own. */
const LocalServers = z.strictObject({
  appDir: z
    .string()
    .min(1)
    .optional()
    .describe(
      "A folder holding the app's Python module (mounted read-only in the sandbox); the shipped keypad env's when absent (give app with it).",
    ),
  app: z
    .string()
    .regex(/^[A-Za-z_][\w.]*:[A-Za-z_]\w*$/, 'module:attribute, e.g. keypad_env:app')
    .optional()
    .describe('The ASGI app, as uvicorn names it: module:attribute (keypad_env:app for the shipped env); give appDir with it.'),
  instances: z.number().int().positive().max(16).default(1).describe('OpenEnv servers each worker starts.'),
  sessions: z
    .number()
    .int()
    .positive()
    .max(64)
    .default(4)
    .describe("Episodes per local server at once (the server's max_concurrent_envs is set to it)."),
});

export const OpenEnvEnvConfig = z
  .strictObject({
    kind: z.literal(OPENENV_KIND).describe('openenv: any OpenEnv environment server.'),
    servers: z
      .array(RemoteServer)
      .min(1)
      .optional()
      .describe('OpenEnv servers already running, by URL; when absent, the workers start local servers themselves.'),
    local: LocalServers.prefault({}).describe(
      'Servers the workers start themselves, each in a sandbox with no network: the shipped keypad env, or an app of your own (not with servers).',
    ),
    tasks: z
      .string()
      .min(1)
      .optional()
      .describe('A task file, {"tasks": [{"id", "kind", "prompt"?, "reset": {...}}]}; the shipped keypad tasks when absent.'),
    actions: z
      .enum(['text', 'tools'])
      .default('text')
      .describe(
        "How the policy acts: text (its reply goes into the action's actionField) or tools (an MCP env: its tools are offered as function calls, each sent as a call_tool action).",
      ),
    actionField: z
      .string()
      .min(1)
      .default('message')
      .describe('The action\'s field the policy\'s reply goes into ({"message": reply}), when actions is text.'),
    observationField: z
      .string()
      .min(1)
      .optional()
      .describe(
        "The observation's field shown to the policy; when absent: text, prompt or message if it is a string, else the observation as JSON.",
      ),
    successReward: z.number().default(0.9).describe('An episode succeeds when its final reward is at least this.'),
    stepSeconds: z
      .number()
      .positive()
      .max(3600)
      .default(30)
      .describe('Seconds one reset or step may take; past it the session is closed and the episode ends as an execution error.'),
    harnessDir: HarnessDir,
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
  })
  .describe('The OpenEnv env: each episode a session (reset, step) on an OpenEnv server, already running or started by the workers.');
export type OpenEnvEnvConfig = z.infer<typeof OpenEnvEnvConfig>;
