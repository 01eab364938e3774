/**
 * A cgroup per sandbox (core/envs/sandbox-cgroup.ts), on this machine's real
 * cgroups: processes started through a group are in it from their first
 * instruction, together they cannot hold more memory than its limit nor run
 * more processes, and the group is gone once removed (or swept, when its
 * worker died). The tests that need cgroups are skipped, saying so, where
 * the worker cannot make them (not root, no controller mounted).
 */
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { cgroupSupport, chooseLayout, groupWorker, memoryText, SandboxCgroup, sweepCgroups } from '../../core/envs/sandbox-cgroup';
import { SandboxSizeConfig, sandboxSizeLimits } from '../../core/envs/sandbox-config';
import { SweEnvConfig } from '../../core/envs/swe/config';
import { giveToSandbox, runSandboxed, SANDBOX_UID } from '../../core/envs/swe/sandbox';

const MiB = 1024 ** 2;
const support = cgroupSupport();
const withCgroups = support.available ? test : test.skip;
if (!support.available) console.log(`sandbox-cgroup tests that need cgroups are skipped: ${support.reason}`);

/** Runs argv in `group`; resolves with its exit code (or signal) and output once it ends. */
function runIn(group: SandboxCgroup, argv: string[]): Promise<{ code: number | null; signal: string | null; output: string }> {
  const [file, args] = group.wrap(argv);
  return new Promise((resolve) => {
    const child = spawn(file, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (c: Buffer) => (output += c.toString()));
    child.stderr.on('data', (c: Buffer) => (output += c.toString()));
    child.on('close', (code, signal) => resolve({ code, signal, output }));
  });
}

/** Four forked children, each touching every page of `each` bytes, then holding it for a second: what a red team did against the per-process limit. */
const FOUR_CHILDREN = (each: number) => [
  'python3',
  '-c',
  [
    'import os, time',
    'for i in range(4):',
    '    if os.fork() == 0:',
    `        x = bytearray(${each})`,
    '        x[::4096] = b"x" * len(x[::4096])',
    '        print("child", i, "holds", flush=True)',
    '        time.sleep(1)',
    '        os._exit(0)',
    'codes = [os.wait()[1] for _ in range(4)]',
    'print("all held" if all(c == 0 for c in codes) else "some were killed", flush=True)',
  ].join('\n'),
];

describe('choosing the cgroup version', () => {
  const mounts = (lines: string[]) => lines.join('\n');
  test('v2 where its cgroup.controllers lists memory and pids', () => {
    const text = mounts(['cgroup2 /sys/fs/cgroup cgroup2 rw,nosuid 0 0']);
    expect(chooseLayout(text, () => 'cpuset cpu io memory pids\n')).toEqual({ version: 2, root: '/sys/fs/cgroup' });
  });

  test("v1's memory and pids hierarchies where v2 has no controllers (this machine's hybrid layout)", () => {
    const text = mounts([
      'cgroup /sys/fs/cgroup/memory cgroup rw,relatime,memory 0 0',
      'cgroup /sys/fs/cgroup/pids cgroup rw,relatime,pids 0 0',
      'cgroup2 /sys/fs/cgroup/unified cgroup2 rw,relatime 0 0',
    ]);
    expect(chooseLayout(text, () => '\n')).toEqual({ version: 1, memory: '/sys/fs/cgroup/memory', pids: '/sys/fs/cgroup/pids' });
  });

  test('none, with the reason, when neither is there', () => {
    expect(chooseLayout(mounts(['proc /proc proc rw 0 0']), () => null)).toEqual({ reason: 'no cgroup file system is mounted' });
    expect(chooseLayout(mounts(['cgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0']), () => null)).toMatchObject({
      reason: expect.stringMatching(/memory and pids hierarchies.*\/sys\/fs\/cgroup\/memory \(cgroup\)/),
    });
  });
});

describe("a sandbox's size in the env config", () => {
  test('MiB and processes, validated with messages that say which field and what is allowed', () => {
    const parsed = SweEnvConfig.parse({ kind: 'swe', data: 'x.json', sandbox: { memoryMiB: 256, processes: 64 } });
    expect(sandboxSizeLimits(parsed.sandbox)).toEqual({ sandboxMemoryBytes: 256 * MiB, maxProcesses: 64 });
    expect(sandboxSizeLimits(undefined)).toEqual({});
    const messages = (value: unknown) => SandboxSizeConfig.safeParse(value).error?.issues.map((i) => i.message) ?? [];
    expect(messages({ memoryMiB: 16 })).toEqual(['sandbox.memoryMiB: at least 64 MiB (a shell, git and Python need that much)']);
    expect(messages({ memoryMiB: 100.5 })).toEqual(['sandbox.memoryMiB: a whole number of MiB, e.g. 4096']);
    expect(messages({ processes: 2 })).toEqual(['sandbox.processes: at least 8 (a shell running a pipeline needs a few)']);
    expect(SandboxSizeConfig.safeParse({ memory: 1 }).success).toBe(false);
  });

  test('limits are written as people write them', () => {
    expect([memoryText(4 * 1024 * MiB), memoryText(256 * MiB), memoryText(1000)]).toEqual(['4 GiB', '256 MiB', '1000 bytes']);
  });
});

describe('a cgroup per sandbox', () => {
  withCgroups('the first process is in the group before it runs anything, and the group is gone once removed', async () => {
    const group = SandboxCgroup.create({ memoryBytes: 256 * MiB, processes: 32 })!;
    const { output, code } = await runIn(group, ['cat', '/proc/self/cgroup']);
    await group.remove();
    expect(code).toBe(0);
    // Every hierarchy the group is made in lists it as the process's own.
    const hierarchies = new Set([group.memoryDir, group.pidsDir]).size;
    expect(output.split('\n').filter((line) => line.endsWith(`/harness-s/${group.name}`))).toHaveLength(hierarchies);
    expect(existsSync(group.memoryDir) || existsSync(group.pidsDir)).toBe(false);
  });

  withCgroups('four forked children cannot together hold more than the memory limit; the group counts the kill', async () => {
    const limit = 128 * MiB;
    const group = SandboxCgroup.create({ memoryBytes: limit, processes: 32 })!;
    try {
      // 4 x 60 MiB: each child is far under any per-process limit, together they are nearly twice the group's.
      const { output } = await runIn(group, FOUR_CHILDREN(60 * MiB));
      expect(output).not.toContain('all held');
      expect(group.memoryLimitReached()).toBe(true);
      expect(group.peakMemoryBytes()).toBeLessThanOrEqual(limit);
    } finally {
      await group.remove();
    }
  });

  withCgroups('the same children under a limit they fit in all hold their memory (the control)', async () => {
    const group = SandboxCgroup.create({ memoryBytes: 512 * MiB, processes: 32 })!;
    try {
      const { output } = await runIn(group, FOUR_CHILDREN(60 * MiB));
      expect(output).toContain('all held');
      expect(group.memoryLimitReached()).toBe(false);
      expect(group.peakMemoryBytes()).toBeGreaterThan(4 * 60 * MiB);
    } finally {
      await group.remove();
    }
  });

  withCgroups('a fork bomb stops at the process limit, and removing the group kills what it left', async () => {
    const group = SandboxCgroup.create({ memoryBytes: 256 * MiB, processes: 20 })!;
    // Forks until one fails; the children are left running (asleep, their output closed): removing the group must kill them.
    const bomb = [
      'import os, sys, time',
      'n = 0',
      'try:',
      '    while n < 1000:',
      '        if os.fork() == 0:',
      '            os.close(1); os.close(2); time.sleep(60); os._exit(0)',
      '        n += 1',
      'except OSError as e:',
      '    print("forked", n, "then", e.strerror, flush=True)',
    ].join('\n');
    const { output } = await runIn(group, ['python3', '-c', bomb]);
    expect(output).toMatch(/^forked \d+ then Resource temporarily unavailable$/m);
    expect(group.processLimitReached()).toBe(true);
    const left = group.processes();
    expect(left.length).toBeGreaterThan(10);
    expect(left.length).toBeLessThanOrEqual(20);
    // A process is its pid and its start time: over a long suite pids wrap around, and a pid may name another process.
    const startTime = (pid: number) => readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ')[19];
    const started = new Map(left.map((pid) => [pid, startTime(pid)]));
    await group.remove();
    const alive = (pid: number) => {
      try {
        return startTime(pid) === started.get(pid) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
      } catch {
        return false; // gone
      }
    };
    expect(left.filter(alive)).toEqual([]);
    expect(existsSync(group.pidsDir)).toBe(false);
  });

  withCgroups("the sweeper removes a dead worker's groups and leaves a live worker's", async () => {
    if (!support.available) return;
    // A dead worker: a process that has ended (its pid and start time name no running process).
    const dead = spawnSync('sh', ['-c', 'echo $$; cut -d" " -f22 /proc/$$/stat'], { encoding: 'utf8' }).stdout.trim().split('\n');
    const deadName = `w${dead[0]}-${dead[1]}-7`;
    const live = SandboxCgroup.create({ memoryBytes: 64 * MiB, processes: 8 })!;
    for (const parent of support.parents) mkdirSync(path.join(parent, deadName));
    try {
      expect(groupWorker(deadName)).toEqual({ pid: Number(dead[0]), start: dead[1] });
      const removed = sweepCgroups();
      expect(removed.sort()).toEqual(support.parents.map((p) => path.join(p, deadName)).sort());
      for (const parent of support.parents) expect(readdirSync(parent)).toContain(live.name);
    } finally {
      await live.remove();
    }
  });

  withCgroups('a group per command, twenty times: each made, joined and removed, none left (the cost is printed, not judged)', async () => {
    if (!support.available) return;
    const rounds = 20;
    const names: string[] = [];
    const started = process.hrtime.bigint();
    for (let i = 0; i < rounds; i++) {
      const group = SandboxCgroup.create({ memoryBytes: 256 * MiB, processes: 32 })!;
      names.push(group.name);
      const { output } = await runIn(group, ['cat', '/proc/self/cgroup']);
      expect(output).toContain(group.name);
      await group.remove();
    }
    const withGroup = Number(process.hrtime.bigint() - started) / 1e6 / rounds;
    const plainStart = process.hrtime.bigint();
    for (let i = 0; i < rounds; i++) await new Promise((resolve) => spawn('true').on('close', resolve));
    const plain = Number(process.hrtime.bigint() - plainStart) / 1e6 / rounds;
    console.log(`a command in its own cgroup: ${withGroup.toFixed(2)} ms, without: ${plain.toFixed(2)} ms (mean of ${rounds})`);
    for (const parent of support.parents) expect(readdirSync(parent).filter((name) => names.includes(name))).toEqual([]);
  });
});

/** Four forked children in a shell command, each touching every page of `mib` MiB and holding it for two seconds: "all held" when none was killed. */
const fourChildren = (mib: number) =>
  `python3 -c "
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

/** This worker's sandbox groups still there (none once its commands ended). */
function groupsLeft(): string[] {
  if (!support.available) return [];
  return support.parents.flatMap((parent) =>
    readdirSync(parent, { withFileTypes: true })
      .filter((e) => e.isDirectory() && e.name.startsWith(`w${process.pid}-`))
      .map((e) => path.join(parent, e.name)),
  );
}

/** Live processes of the SWE sandbox's user, as the host sees them. */
function sandboxUserProcesses(): string[] {
  const rows = spawnSync('ps', ['-eo', 'uid=,stat=,pid='], { encoding: 'utf8' })
    .stdout.split('\n')
    .map((l) => l.trim().split(/\s+/));
  return rows.filter((r) => r[0] === String(SANDBOX_UID) && !r[1].startsWith('Z')).map((r) => r[2]);
}

// SWE's sandbox (bubblewrap), judged from the host: the red team's forked children, and a fork bomb.
describe("a SWE command's sandbox in its own cgroup", () => {
  const LIMIT = 256 * MiB;
  const workspace = () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'swe-cgroup-'));
    giveToSandbox(dir);
    return dir;
  };

  withCgroups(
    'four forked children cannot together hold more than its memory: the command is killed, the host saw no more than the limit, and the group is gone',
    async () => {
      const dir = workspace();
      const limits = { sandboxMemoryBytes: LIMIT };
      // 4 x 100 MiB against 256 MiB for the sandbox, each child far under the 4 GiB per-process limit; the control: 4 x 40 MiB.
      const over = await runSandboxed(fourChildren(100), { workspace: dir, limits });
      const fits = await runSandboxed(fourChildren(40), { workspace: dir, limits });
      spawnSync('rm', ['-rf', dir]);
      expect(over.output).not.toContain('all held');
      expect(over).toMatchObject({ memoryLimitReached: true, exitCode: null });
      expect(over.peakMemoryBytes).toBeGreaterThan(0);
      expect(over.peakMemoryBytes!).toBeLessThanOrEqual(LIMIT);
      expect(fits.output).toContain('all held');
      expect(fits).toMatchObject({ memoryLimitReached: false, exitCode: 0 });
      expect(fits.peakMemoryBytes!).toBeGreaterThan(4 * 40 * MiB);
      expect(groupsLeft()).toEqual([]);
    },
  );

  withCgroups('a fork bomb is stopped at its process limit (the group counts the refused forks), and nothing of it is left', async () => {
    const dir = workspace();
    const bomb = `python3 -c "
import os, time
n = 0
try:
    while n < 1000:
        if os.fork() == 0:
            os.close(1); os.close(2); time.sleep(60); os._exit(0)
        n += 1
except OSError as e:
    print('forked', n, 'then', e.strerror)
"`;
    const result = await runSandboxed(bomb, { workspace: dir, limits: { maxProcesses: 32, timeoutSeconds: 60 } });
    spawnSync('rm', ['-rf', dir]);
    const forked = /^forked (\d+) then Resource temporarily unavailable$/m.exec(result.output);
    expect(forked).not.toBeNull();
    expect(Number(forked![1])).toBeLessThan(32);
    expect(result.processLimitReached).toBe(true);
    expect(sandboxUserProcesses()).toEqual([]);
    expect(groupsLeft()).toEqual([]);
  });
});
