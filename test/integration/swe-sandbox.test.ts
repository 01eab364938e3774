/**
 * Attack episodes: an agent in the SWE sandbox tries to get out or to hurt
 * the worker, and each attempt is contained. The actions go through a real
 * episode (the shell and the editor as the policy would call them); what is
 * asserted is seen from the host.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, statfsSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { SweEnvironment } from '../../core/envs/swe/environment';
import { loadSweData, setupInstanceSet } from '../../core/envs/swe/build';
import { SANDBOX_UID } from '../../core/envs/swe/sandbox';
import { cgroupSupport } from '../../core/envs/sandbox-cgroup';
import { sweepWorkspaces, workRoot, WORKSPACE_GROWTH } from '../../core/envs/swe/workspace';
import { mountsUnder, sizedFolderSupport } from '../../core/envs/sized-folder';
import { specFiles, specHarnesses } from '../../core/envs/registry';
import { SWE_POOL_DIR, sweRegistration } from '../../core/envs/swe/registration';
import { loadHarnessPool } from '../../core/harness/spec';
import { SHIPPED_SWE_SET } from '../../cli/swe';

setupInstanceSet(SHIPPED_SWE_SET);
const instance = loadSweData(SHIPPED_SWE_SET).find((i) => i.instance_id === 'markdown-3.8.1')!;
const env = new SweEnvironment({
  instances: [instance],
  harnesses: specHarnesses(sweRegistration, loadHarnessPool(specFiles(SWE_POOL_DIR))),
});

const bash = (command: string, timeout?: number) =>
  JSON.stringify({ tool: 'execute_bash', arguments: { command, ...(timeout ? { timeout } : {}) } });
const edit = (args: Record<string, unknown>) => JSON.stringify({ tool: 'str_replace_editor', arguments: args });

/** Processes of the sandbox user on the host: the live ones, and the count of zombies. */
function sandboxProcesses(): { live: string[]; zombies: number } {
  const rows = execFileSync('ps', ['-eo', 'uid=,stat=,pid=,args='], { encoding: 'utf8' })
    .split('\n')
    .map((l) => l.trim().split(/\s+/));
  const mine = rows.filter((r) => r[0] === String(SANDBOX_UID));
  return {
    live: mine.filter((r) => !r[1].startsWith('Z')).map((r) => r.slice(2).join(' ')),
    zombies: mine.filter((r) => r[1].startsWith('Z')).length,
  };
}
const zombiesAtStart = sandboxProcesses().zombies;
afterAll(() => {
  // No sandbox leaves a zombie behind either (a host init that does not reap would keep it for good).
  expect(sandboxProcesses().zombies).toBe(zombiesAtStart);
});

async function inEpisode<T>(fn: (step: (action: string) => Promise<string>) => Promise<T>): Promise<T> {
  const episode = await env.startEpisode(instance.instance_id, { maxTurns: 20 });
  try {
    return await fn(async (action) => (await episode.step(action)).observation);
  } finally {
    await episode.close();
  }
}

const PROJECT = path.resolve(__dirname, '../..');
const hostDir = mkdtempSync(path.join(os.tmpdir(), 'swe-attack-host-'));
const secretFile = path.join(hostDir, 'secret.txt');
writeFileSync(secretFile, 'HOST-SECRET-CONTENT');

describe('attack episodes are contained', () => {
  test('writing outside the workspace: the system is read-only and host folders are not there', async () => {
    const out = await inEpisode((step) =>
      step(
        bash(
          `echo x > /usr/pwned; echo x > /etc/pwned; echo x > ${hostDir}/pwned; touch /root/pwned; ls /work /root ${hostDir}; echo done`,
        ),
      ),
    );
    expect(out).toMatch(/Read-only file system/);
    expect(out).toMatch(/No such file or directory/);
    expect(existsSync('/usr/pwned')).toBe(false);
    expect(existsSync('/etc/pwned')).toBe(false);
    expect(existsSync(path.join(hostDir, 'pwned'))).toBe(false);
  });

  test("reaching the network: no route to the host's services (a listening port on the host gets no connection) nor to the internet", async () => {
    let connections = 0;
    const listener: Server = createServer((socket) => {
      connections += 1;
      socket.destroy();
    });
    await new Promise<void>((resolve) => listener.listen(0, '127.0.0.1', resolve));
    const port = (listener.address() as { port: number }).port;
    try {
      const out = await inEpisode((step) =>
        step(
          bash(
            `python -c "import socket; socket.create_connection(('127.0.0.1', ${port}), timeout=3)" 2>&1 | tail -1; ` +
              'python -c "import socket; socket.create_connection((\'127.0.0.1\', 5432), timeout=3)" 2>&1 | tail -1; ' +
              'python -c "import urllib.request; urllib.request.urlopen(\'https://pypi.org\', timeout=5)" 2>&1 | tail -1',
          ),
        ),
      );
      expect(out.match(/ConnectionRefusedError/g)?.length).toBe(2);
      expect(out).toMatch(/URLError|Temporary failure in name resolution|Network is unreachable/);
      expect(connections).toBe(0);
    } finally {
      listener.close();
    }
  });

  test("reading the worker's environment or the run store's credentials: none of it is there", async () => {
    process.env.HARNESS_S_ATTACK_CANARY = 'canary-4f1d9c';
    const out = await inEpisode((step) =>
      step(
        bash(
          `env; cat /proc/1/environ | tr "\\0" "\\n"; for f in /proc/[0-9]*/environ; do tr "\\0" "\\n" < $f; done; ls ~ /root/.pgpass; cat ${PROJECT}/deploy/secrets.env.example ${PROJECT}/package.json; echo end`,
        ),
      ),
    );
    delete process.env.HARNESS_S_ATTACK_CANARY;
    expect(out).not.toContain('canary-4f1d9c');
    expect(out).not.toMatch(/DATABASE_URL|postgresql:\/\/|OPENAI_API_KEY|TEMPORAL_ADDRESS/);
    expect(out).toMatch(/\/root\/\.pgpass': No such file or directory/);
    // The project's own folder (where deploy/secrets.env lives) is not there either.
    expect(out).toContain(`${PROJECT}/package.json: No such file or directory`);
    expect(out).toContain('end');
  });

  test('a symlink to a host file: the shell cannot read it, and the editor refuses it', async () => {
    const [shell, viewed, written] = await inEpisode(async (step) => [
      await step(bash(`ln -s ${secretFile} /workspace/leak && cat /workspace/leak`)),
      await step(edit({ command: 'view', path: '/workspace/leak' })),
      await step(edit({ command: 'create', path: '/workspace/leak/../../../../../tmp/x', file_text: 'x' })),
    ]);
    expect(shell).not.toContain('HOST-SECRET-CONTENT');
    expect(viewed).toMatch(/^Error: .*(leads outside|leads nowhere)/);
    expect(viewed).not.toContain('HOST-SECRET-CONTENT');
    expect(written).toMatch(/^Error: .*outside \/workspace/);
    expect(readFileSync(secretFile, 'utf8')).toBe('HOST-SECRET-CONTENT');
  });

  test('a fork bomb hits the process limit and is killed with its sandbox; the worker carries on', async () => {
    const started = Date.now();
    const out = await inEpisode(async (step) => {
      const bomb = await step(bash('bomb() { bomb | bomb & }; bomb; sleep 5; echo survived', 15));
      const after = await step(bash('echo still-usable'));
      return `${bomb}\n${after}`;
    });
    // The process limit stops it (fork fails), well before the wall clock.
    expect(out).toMatch(/fork: (retry: )?Resource temporarily unavailable/);
    expect(out).toContain('still-usable');
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(sandboxProcesses().live).toEqual([]);
  });

  test('huge output is cut for the agent and a flood is killed', async () => {
    const [cut, flood] = await inEpisode(async (step) => [
      await step(bash('head -c 1000000 /dev/zero | tr "\\0" a')),
      await step(bash('yes', 60)),
    ]);
    expect(cut.length).toBeLessThan(20 * 1024);
    expect(cut).toMatch(/output cut: 1000000 bytes in all/);
    expect(flood).toMatch(/killed: the command wrote more output than allowed/);
  });

  test('processes left in the background end with the command', async () => {
    const out = await inEpisode((step) => step(bash('nohup sleep 300 >/dev/null 2>&1 & setsid sleep 301 & (sleep 302 &) ; echo started')));
    expect(out).toContain('started');
    expect(sandboxProcesses().live).toEqual([]);
  });

  test('a folder tree deeper than a path may be long is removed with the workspace (Node alone cannot remove it)', async () => {
    let dir = '';
    const out = await inEpisode(async (step) => {
      dir = readdirSync(workRoot())
        .filter((n) => n.includes(instance.instance_id))
        .map((n) => path.join(workRoot(), n))
        .sort()
        .at(-1)!;
      return step(bash(`python -c "import os\nfor _ in range(3000):\n    os.mkdir('d' * 200); os.chdir('d' * 200)\nprint('deep')"`));
    });
    expect(out).toMatch(/deep/);
    expect(existsSync(dir)).toBe(false);
  });

  test('a huge file and a memory hog hit their limits', async () => {
    const out = await inEpisode((step) =>
      step(
        bash(
          'head -c 400000000 /dev/zero > big.bin; ls -la big.bin | cut -d" " -f5; python -c "x = bytearray(6 * 1024**3)" 2>&1 | tail -1; rm -f big.bin',
        ),
      ),
    );
    expect(out).toMatch(/File size limit exceeded|File too large/);
    expect(out).toMatch(/MemoryError/);
  });

  test('a command over its time limit is killed, and closing the episode removes the workspace', async () => {
    let dir = '';
    const out = await inEpisode(async (step) => {
      dir = readdirSync(workRoot())
        .filter((n) => n.includes(instance.instance_id))
        .map((n) => path.join(workRoot(), n))
        .sort()
        .at(-1)!;
      return step(bash('sleep 30', 2));
    });
    expect(out).toMatch(/killed: the command ran over 2 s/);
    expect(existsSync(dir)).toBe(false);
  });

  test('cancelling an episode (its activity cancelled) kills the running command at once', async () => {
    const abort = new AbortController();
    const episode = await env.startEpisode(instance.instance_id, { maxTurns: 5, signal: abort.signal });
    const started = Date.now();
    setTimeout(() => abort.abort(), 300);
    // The step fails with the abort (a cut-short command is not a result the agent or the scorer could take for real).
    await expect(episode.step(bash('sleep 60; echo finished', 120))).rejects.toThrow(/aborted/);
    await episode.close();
    expect(Date.now() - started).toBeLessThan(5000);
    expect(sandboxProcesses().live).toEqual([]);
  });

  test('nested user namespaces are off: unshare -Urn gets no uid 0', async () => {
    const out = await inEpisode((step) => step(bash('unshare -Urn sh -c "id -u"; echo "unshare exit $?"')));
    expect(out).not.toMatch(/^0$/m);
    expect(out).toMatch(/unshare exit 1/);
  });

  test('syscalls the seccomp filter refuses fail with EPERM, while the shell, git, Python and pytest work', async () => {
    // Each call as Python's ctypes makes it; -errno printed, so EPERM is -1.
    const probe = [
      'import ctypes, os',
      'libc = ctypes.CDLL(None, use_errno=True)',
      'def call(name, *args):',
      '    r = getattr(libc, name)(*args)',
      '    print(name, r if r >= 0 else -ctypes.get_errno())',
      'call("ptrace", 0, 0, 0, 0)', // PTRACE_TRACEME
      'call("personality", 0x0040000)', // ADDR_NO_RANDOMIZE
      'call("syscall", 425, 8, ctypes.create_string_buffer(120))', // io_uring_setup
      'call("syscall", 250, 0, -3, 0)', // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING)
      'call("unshare", 0x10000000)', // CLONE_NEWUSER
      'call("mount", b"none", b"/tmp", b"tmpfs", 0, None)',
      'call("syscall", 56, 0x10000000 | 17, 0, 0, 0, 0)', // clone(CLONE_NEWUSER | SIGCHLD)
    ].join('\n');
    const [refused, tools] = await inEpisode(async (step) => [
      await step(bash(`python - <<'EOF'\n${probe}\nEOF`)),
      await step(
        bash(
          `echo '# x' >> README.md && git diff --stat && python -m pytest -q -p no:cacheprovider ${instance.harness_s!.test_files[0]} 2>&1 | tail -1`,
          300,
        ),
      ),
    ]);
    for (const call of ['ptrace', 'personality', 'syscall', 'unshare', 'mount']) expect(refused).toMatch(new RegExp(`^${call} -1$`, 'm'));
    expect(refused.match(/ -1$/gm)).toHaveLength(7);
    expect(tools).toMatch(/README\.md \| 1 \+/);
    expect(tools).toMatch(/\d+ passed/);
    expect(tools).toMatch(/\[exit code 0\]/);
  });

  test('filling /dev/shm, /tmp and /dev stops at their size (64 MB, 256 MB, read-only)', async () => {
    // Files of 100 MB, under the 256 MB per-file limit: what stops them is the file system's size.
    const fill = (dir: string) =>
      `for i in 1 2 3 4 5; do head -c 100000000 /dev/zero > ${dir}/fill$i 2>/dev/null || echo "${dir}: full"; done; echo "${dir} holds $(cat ${dir}/fill* 2>/dev/null | wc -c)"`;
    const out = await inEpisode((step) => step(bash(`${fill('/dev/shm')}; ${fill('/tmp')}; ${fill('/dev')}`, 120)));
    const holds = (dir: string) => Number(new RegExp(`^${dir} holds (\\d+)$`, 'm').exec(out)![1]);
    expect(out).toContain('/dev/shm: full');
    expect(holds('/dev/shm')).toBeLessThanOrEqual(64 * 1024 ** 2);
    expect(out).toContain('/tmp: full');
    expect(holds('/tmp')).toBeLessThanOrEqual(256 * 1024 ** 2);
    expect(out).toContain('/dev: full');
    expect(holds('/dev')).toBe(0);
  });

  test('growing the workspace past its bound stops the command and ends the episode; the host sees it bounded, then removed', async () => {
    const episode = await env.startEpisode(instance.instance_id, { maxTurns: 5 });
    const dir = readdirSync(workRoot())
      .filter((n) => n.includes(instance.instance_id))
      .map((n) => path.join(workRoot(), n))
      .sort()
      .at(-1)!;
    try {
      // 40 files of 100 MB: 4 GB when nothing stops it. (A sized workspace stops it with ENOSPC; a polled one by killing it.)
      const outcome = await episode.step(bash('for i in $(seq 1 40); do head -c 100000000 /dev/zero > fill$i; done; echo finished', 300));
      expect(outcome.observation).toMatch(/workspace grew past its bound/);
      expect(outcome).toMatchObject({ done: true, reward: 0, success: false });
      const bytes = Number(execFileSync('du', ['-sb', path.join(dir, 'repo')], { encoding: 'utf8' }).split('\t')[0]);
      expect(bytes).toBeLessThan(2.5 * 1024 ** 3);
    } finally {
      await episode.close();
    }
    expect(existsSync(dir)).toBe(false);
  });

  test('creating files past the bound on entries stops the command too', async () => {
    const out = await inEpisode((step) => step(bash('mkdir many && cd many && seq 1 300000 | xargs touch; ls | wc -l', 300)));
    expect(out).toMatch(/workspace grew past its bound/);
    // Fewer than 300,000 made: the bound is 100,000 over the tree's entries.
    const made = /^(\d+)$/m.exec(out);
    if (made) expect(Number(made[1])).toBeLessThan(150_000);
  });

  test('the editor shows a huge folder and a one-line 4 MB file capped, quickly, without holding up the worker', async () => {
    const gaps: number[] = [];
    const [big, wide] = await inEpisode(async (step) => {
      await step(
        bash(
          "python -c \"\nimport os\nfor d in range(40):\n    os.makedirs(f'tree/d{d}')\n    for f in range(500):\n        open(f'tree/d{d}/f{f}.py', 'w').close()\"; head -c 4194304 /dev/zero | tr \"\\0\" a > one-line.js",
          300,
        ),
      );
      // A timer on the worker's event loop: its longest gap is how long the editor held the loop.
      let last = Date.now();
      const ticker = setInterval(() => {
        gaps.push(Date.now() - last);
        last = Date.now();
      }, 5);
      try {
        const started = Date.now();
        const results = [
          await step(edit({ command: 'view', path: '/workspace/tree' })),
          await step(edit({ command: 'view', path: '/workspace/one-line.js' })),
        ];
        expect(Date.now() - started).toBeLessThan(5000);
        return results;
      } finally {
        clearInterval(ticker);
      }
    });
    expect(Buffer.byteLength(big)).toBeLessThan(17 * 1024);
    expect(big).toMatch(/^\/workspace\/tree\/d0\/f0\.py$/m);
    expect(big).toMatch(/listing cut/);
    expect(Buffer.byteLength(wide)).toBeLessThan(17 * 1024);
    expect(wide).toMatch(/output cut: 4194\d{3} bytes in all/);
    expect(Math.max(...gaps)).toBeLessThan(250);
  });

  test("the sweeper removes a dead worker's old workspaces and leaves young ones", () => {
    const root = mkdtempSync(path.join(os.tmpdir(), 'swe-sweep-'));
    const old = `swe-${Date.now() - 7 * 3600_000}-abcd1234-x`;
    const young = `swe-${Date.now()}-abcd1234-y`;
    for (const name of [old, young, 'unrelated']) execFileSync('mkdir', ['-p', path.join(root, name, 'repo')]);
    expect(sweepWorkspaces({ olderThanMs: 6 * 3600_000, root })).toEqual([old]);
    expect(readdirSync(root).sort()).toEqual([young, 'unrelated'].sort());
  });
});

/** Bytes in use on the host's file system holding `dir`, as statvfs counts them. */
function diskUsed(dir: string): number {
  const s = statfsSync(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

/** Runs `fn` while the host's disk use is sampled (every 20 ms): its start, and the most it grew over it while `fn` ran. */
async function diskGrowth<T>(dir: string, fn: () => Promise<T>): Promise<{ result: T; start: number; peak: number }> {
  const start = diskUsed(dir);
  let peak = 0;
  const sampler = setInterval(() => (peak = Math.max(peak, diskUsed(dir) - start)), 20);
  try {
    const result = await fn();
    return { result, start, peak: Math.max(peak, diskUsed(dir) - start) };
  } finally {
    clearInterval(sampler);
  }
}

// The red team's attacks on the disk: space the workspace's size never showed (files deleted but held open) and a
// burst faster than a poll. Other work on this machine moves the host's disk use too: SLACK leaves room for it.
(sizedFolderSupport().ok ? describe : describe.skip)("the workspace is a file system of its bound's size (the worker is root)", () => {
  const SLACK = 256 * 1024 ** 2;
  const BOUND =
    Number(execFileSync('du', ['-sB1', instance.harness_s!.tree], { encoding: 'utf8' }).split('\t')[0]) + WORKSPACE_GROWTH.bytes;

  /** One command in a fresh episode, the host's disk watched while it runs; then the episode is closed and its workspace must be gone. */
  async function attack(command: string) {
    const episode = await env.startEpisode(instance.instance_id, { maxTurns: 5 });
    const dir = readdirSync(workRoot())
      .filter((n) => n.includes(instance.instance_id))
      .map((n) => path.join(workRoot(), n))
      .sort()
      .at(-1)!;
    try {
      const { result: outcome, start, peak } = await diskGrowth(workRoot(), () => episode.step(bash(command, 300)));
      await episode.close();
      // The host's file system counts freed blocks as free once its journal commits them: up to 15 s for the space to come back.
      const deadline = Date.now() + 15_000;
      while (diskUsed(workRoot()) - start >= SLACK && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 100));
      return { outcome, peak, after: diskUsed(workRoot()) - start, dir };
    } finally {
      await episode.close();
    }
  }

  test("files deleted but held open (24 x 250 MiB, 6 GiB) stop at the bound with ENOSPC; the host's disk grows by no more than the bound, and gets it back", async () => {
    // Each file is opened on a shell fd, deleted, then written: no listing of the workspace ever shows it.
    const { outcome, peak, after, dir } = await attack(
      'for i in $(seq 3 26); do eval "exec $i>held$i"; rm held$i; head -c 262144000 /dev/zero >&$i || echo "held$i: refused"; done; sleep 2; echo finished',
    );
    expect(outcome.observation).toMatch(/No space left on device/);
    expect(outcome.observation).toMatch(/held\d+: refused/);
    expect(outcome.observation).toMatch(/workspace grew past its bound/);
    expect(outcome).toMatchObject({ done: true, reward: 0, success: false });
    expect(peak).toBeLessThan(BOUND + SLACK);
    expect(after).toBeLessThan(SLACK);
    expect(existsSync(dir)).toBe(false);
    expect(mountsUnder(dir)).toEqual([]);
  });

  test("a burst of fallocate (40 x 250 MiB, 10 GB, in far less than a second) stops at the bound with ENOSPC; the host's disk grows by no more than the bound", async () => {
    const { outcome, peak, after, dir } = await attack(
      'for i in $(seq 1 40); do fallocate -l 250M burst$i || break; done; ls burst* | wc -l',
    );
    expect(outcome.observation).toMatch(/fallocate failed: No space left on device/);
    expect(outcome.observation).toMatch(/workspace grew past its bound/);
    expect(outcome).toMatchObject({ done: true, reward: 0, success: false });
    expect(peak).toBeLessThan(BOUND + SLACK);
    expect(after).toBeLessThan(SLACK);
    expect(mountsUnder(dir)).toEqual([]);
  });
});

/** Four forked children, each touching every page of `mib` MiB and holding it for two seconds: "all held" when none was killed. */
const fourChildren = (mib: number) =>
  `python -c "
import os, time
for i in range(4):
    if os.fork() == 0:
        x = bytearray(${mib} * 2**20)
        x[::4096] = b'x' * len(x[::4096])
        print('child', i, 'holds ${mib} MiB', flush=True)
        time.sleep(2)
        os._exit(0)
codes = [os.wait()[1] for _ in range(4)]
print('all held' if all(c == 0 for c in codes) else 'some were killed', flush=True)
"`;

/** The sandbox groups of this worker still there (there should be none once its commands ended). */
function groupsLeft(): string[] {
  const found = cgroupSupport();
  if (!found.available) return [];
  return found.parents.flatMap((parent) =>
    readdirSync(parent, { withFileTypes: true })
      .filter((e) => e.isDirectory() && e.name.startsWith(`w${process.pid}-`))
      .map((e) => path.join(parent, e.name)),
  );
}

// The red team's attack: forked children that each stay under the per-process limit but together hold far more.
(cgroupSupport().available ? describe : describe.skip)('memory and processes are bounded per sandbox (a cgroup per command)', () => {
  const LIMIT = 256 * 1024 ** 2;
  const small = new SweEnvironment({ instances: [instance], harnesses: env.harnesses(), limits: { sandboxMemoryBytes: LIMIT } });

  test("four forked children cannot together hold more than the sandbox's memory: the command is killed and the episode ends as an execution error", async () => {
    const episode = await small.startEpisode(instance.instance_id, { maxTurns: 5 });
    try {
      // 4 x 100 MiB: 400 MiB against 256 MiB for the sandbox (each child is far under the 4 GiB per-process limit).
      const outcome = await episode.step(bash(fourChildren(100), 60));
      expect(outcome.observation).not.toContain('all held');
      expect(outcome.observation).toMatch(/the sandbox's memory limit of 256 MiB was reached/);
      expect(outcome).toMatchObject({ done: true, success: false, reward: 0, failureType: 'execution_error' });
    } finally {
      await episode.close();
    }
    // This worker's groups, not the sandbox user's processes: other workers on the host run commands as nobody too.
    expect(groupsLeft()).toEqual([]);
  });
});
