/**
 * Several hosts on this machine, for tests of what crosses a network: each a
 * Linux network namespace on a bridge (its own address, 10.231.0.1x; the root
 * namespace is 10.231.0.1), with its own mount namespace in which /tmp and
 * the repository's .data are empty tmpfs of its own, so nothing it writes is
 * seen by another host. Processes start inside a host (nsenter into its
 * anchor process) and are stopped by their pid. Needs root and iproute2.
 *
 * A host's link can go down and up (its veth on the bridge), and a host can
 * be lost whole (every process SIGKILLed, its tmpfs gone) and started anew.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';

export const ROOT = path.resolve(__dirname, '..', '..');
const PREFIX = 'hs-mh';
const SUBNET = '10.231.0';
export const BRIDGE_IP = `${SUBNET}.1`;

function ip(...args: string[]): void {
  execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
}

function tryIp(...args: string[]): void {
  try {
    ip(...args);
  } catch {
    // not there
  }
}

/** The processes inside a network namespace (none when it does not exist). */
function netnsPids(netns: string): number[] {
  try {
    return execFileSync('ip', ['netns', 'pids', netns], { stdio: ['ignore', 'pipe', 'ignore'] })
      .toString()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    return [];
  }
}

/** Whether this machine can make test hosts (root, network namespaces). */
export function canMakeTestHosts(): boolean {
  if (process.getuid?.() !== 0) return false;
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
    execFileSync('nsenter', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

export interface HostProcess {
  name: string;
  child: ChildProcess;
  pid: number;
  /** Resolves with the exit code (or signal name) once it has exited. */
  exited: Promise<number | string>;
}

export class TestHost {
  private anchor: ChildProcess | null = null;
  readonly processes = new Map<string, HostProcess>();

  constructor(
    readonly name: string,
    readonly ip: string,
    private readonly logDir: string,
  ) {}

  get netns(): string {
    return `${PREFIX}-${this.name}`;
  }

  /** The root side of the host's link. */
  get link(): string {
    return `${PREFIX}-${this.name}0`;
  }

  /**
   * Its mount namespace: /tmp and <repo>/.data as empty tmpfs of its own, held by an anchor process.
   * The repository is carried over the new /tmp (held at /mnt meanwhile): a clone may itself live in /tmp.
   */
  async boot(): Promise<void> {
    const script = [
      `mount --rbind '${ROOT}' /mnt`,
      'mount -t tmpfs -o size=1g tmpfs /tmp',
      `mkdir -p '${ROOT}'`,
      `mount --move /mnt '${ROOT}'`,
      `mount -t tmpfs -o size=1g tmpfs '${ROOT}/.data'`,
      'echo ready',
      'exec sleep infinity',
    ].join(' && ');
    const anchor = spawn('ip', ['netns', 'exec', this.netns, 'unshare', '--mount', '--propagation', 'private', 'sh', '-c', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.anchor = anchor;
    await new Promise<void>((resolve, reject) => {
      let err = '';
      anchor.stderr!.on('data', (d: Buffer) => (err += d.toString()));
      anchor.stdout!.once('data', () => resolve());
      anchor.once('exit', (code) => reject(new Error(`host ${this.name} did not boot (exit ${code}): ${err}`)));
    });
  }

  /** Starts `argv` inside the host, in the repository, logging to <logDir>/<host>-<name>.log. */
  start(name: string, argv: string[], env: NodeJS.ProcessEnv): HostProcess {
    if (!this.anchor?.pid) throw new Error(`host ${this.name} is not booted`);
    const log = createWriteStream(path.join(this.logDir, `${this.name}-${name}.log`), { flags: 'a' });
    const child = spawn('nsenter', ['-t', String(this.anchor.pid), '-m', '-n', `--wd=${ROOT}`, '--', ...argv], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.pipe(log, { end: false });
    child.stderr!.pipe(log, { end: false });
    const exited = new Promise<number | string>((resolve) => child.once('exit', (code, signal) => resolve(code ?? signal ?? -1)));
    const proc = { name, child, pid: child.pid!, exited };
    this.processes.set(name, proc);
    return proc;
  }

  /** SIGKILLs one process, by its pid, and waits for it to be gone. */
  async kill(name: string): Promise<void> {
    const proc = this.processes.get(name);
    if (!proc) return;
    this.processes.delete(name);
    try {
      process.kill(proc.pid, 'SIGKILL');
    } catch {
      // already gone
    }
    await proc.exited;
  }

  /** Every process of the host SIGKILLed, its anchor too: its tmpfs (its .data) is gone with it. */
  async lose(): Promise<void> {
    await Promise.all([...this.processes.keys()].map((name) => this.kill(name)));
    const anchor = this.anchor;
    this.anchor = null;
    if (anchor?.pid) {
      const gone = new Promise((resolve) => anchor.once('exit', resolve));
      try {
        process.kill(anchor.pid, 'SIGKILL');
      } catch {
        // already gone
      }
      await gone;
    }
  }

  linkDown(): void {
    ip('link', 'set', this.link, 'down');
  }

  linkUp(): void {
    ip('link', 'set', this.link, 'up');
  }
}

export class TestNetwork {
  readonly bridge = `${PREFIX}-br`;

  private constructor(readonly hosts: TestHost[]) {}

  /** A bridge at 10.231.0.1 and one host per name at 10.231.0.11, .12, ...; leftovers of an earlier run are removed first. */
  static async create(names: string[], logDir: string): Promise<TestNetwork> {
    mkdirSync(path.join(ROOT, '.data'), { recursive: true });
    mkdirSync(logDir, { recursive: true });
    const network = new TestNetwork(names.map((name, i) => new TestHost(name, `${SUBNET}.${11 + i}`, logDir)));
    network.removeLinks();
    ip('link', 'add', network.bridge, 'type', 'bridge');
    ip('addr', 'add', `${BRIDGE_IP}/24`, 'dev', network.bridge);
    ip('link', 'set', network.bridge, 'up');
    for (const host of network.hosts) {
      const inside = `${PREFIX}-${host.name}1`;
      ip('netns', 'add', host.netns);
      ip('link', 'add', host.link, 'type', 'veth', 'peer', 'name', inside);
      ip('link', 'set', inside, 'netns', host.netns);
      ip('link', 'set', host.link, 'master', network.bridge, 'up');
      ip('-n', host.netns, 'addr', 'add', `${host.ip}/24`, 'dev', inside);
      ip('-n', host.netns, 'link', 'set', inside, 'up');
      ip('-n', host.netns, 'link', 'set', 'lo', 'up');
      await host.boot();
    }
    return network;
  }

  host(name: string): TestHost {
    const host = this.hosts.find((h) => h.name === name);
    if (!host) throw new Error(`no test host ${name}`);
    return host;
  }

  /** Every host's processes stopped by pid, then the namespaces and the bridge removed. */
  async close(): Promise<void> {
    for (const host of this.hosts) await host.lose();
    this.removeLinks();
  }

  /** The namespaces and links, with any process an earlier run left in them (stopped by pid). */
  private removeLinks(): void {
    for (const host of this.hosts) {
      for (const pid of netnsPids(host.netns)) {
        try {
          process.kill(pid, 'SIGKILL');
        } catch {
          // gone
        }
      }
      tryIp('netns', 'del', host.netns);
      tryIp('link', 'del', host.link);
    }
    tryIp('link', 'del', this.bridge);
  }
}

/**
 * A TCP relay on the bridge address to a service that listens on loopback
 * only (PostgreSQL, the Temporal dev server), so the hosts reach it.
 */
export async function relay(listenPort: number, target: { host: string; port: number }): Promise<{ port: number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(target.port, target.host);
    sockets.add(client).add(upstream);
    client.pipe(upstream).pipe(client);
    const end = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('error', end).on('close', end);
    upstream.on('error', end).on('close', end);
  });
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(listenPort, BRIDGE_IP, () => resolve()));
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
