/**
 * The sandbox's seccomp filter: the syscalls a shell, git, Python and pytest
 * never need, which are the kernel's larger attack surface or a way around
 * the sandbox, are refused with EPERM (ENOSYS for clone3, so glibc falls back
 * to clone, whose flags a classic BPF filter can read). Everything else is
 * allowed: a deny-list, as Docker's and Flatpak's default profiles refuse the
 * same calls, and another architecture's syscalls (32-bit ones on a 64-bit
 * kernel) are refused as a whole.
 *
 * The rules are data here; libseccomp compiles them (seccomp_filter.py, run
 * with Debian's Python and its python3-seccomp), which knows each
 * architecture's syscall numbers and the audit-arch check. bubblewrap loads
 * the program (`--seccomp FD`) just before it runs the command, after its own
 * mounts and namespaces, which need some of these calls.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';

const EPERM = 1;
const ENOSYS = 38;

/** A condition on a syscall argument; `masked_eq`: (arg & mask) == value. */
export type SeccompCondition =
  { arg: number; op: 'eq' | 'ne'; value: number } | { arg: number; op: 'masked_eq'; mask: number; value: number };

/** A syscall refused with `errno`: always, or when every condition in `when` holds. */
export interface SeccompRule {
  syscall: string;
  errno: number;
  when?: SeccompCondition[];
}

const refuse = (...syscalls: string[]): SeccompRule[] => syscalls.map((syscall) => ({ syscall, errno: EPERM }));

/** clone's namespace flags (CLONE_NEWNS, NEWCGROUP, NEWUTS, NEWIPC, NEWUSER, NEWPID, NEWNET): a new namespace is a new kernel surface to attack. */
const CLONE_NAMESPACE_FLAGS = [0x00020000, 0x02000000, 0x04000000, 0x08000000, 0x10000000, 0x20000000, 0x40000000];

/** Terminal ioctls that push input into the terminal or drive the console: TIOCSTI, TIOCLINUX. */
const TERMINAL_INJECTION = [0x5412, 0x541c];

export const SECCOMP_RULES: readonly SeccompRule[] = [
  // Mounts and root changes: the file system the sandbox was given is the one it keeps.
  ...refuse(
    'mount',
    'umount2',
    'pivot_root',
    'chroot',
    'open_tree',
    'move_mount',
    'fsopen',
    'fsconfig',
    'fsmount',
    'fspick',
    'mount_setattr',
  ),
  // Namespaces: no new or other ones (bubblewrap's --disable-userns also stops nested user namespaces).
  ...refuse('unshare', 'setns'),
  ...CLONE_NAMESPACE_FLAGS.map((flag): SeccompRule => ({
    syscall: 'clone',
    errno: EPERM,
    when: [{ arg: 0, op: 'masked_eq', mask: flag, value: flag }],
  })),
  // clone3 passes its flags in memory, which a filter cannot read: ENOSYS makes glibc use clone.
  { syscall: 'clone3', errno: ENOSYS },
  // Reading or steering other processes.
  ...refuse('ptrace', 'process_vm_readv', 'process_vm_writev', 'pidfd_getfd', 'process_madvise', 'kcmp'),
  // Kernel surfaces with a record of privilege escalations, unused by the tools the sandbox runs.
  ...refuse(
    'bpf',
    'perf_event_open',
    'userfaultfd',
    'io_uring_setup',
    'io_uring_enter',
    'io_uring_register',
    'keyctl',
    'add_key',
    'request_key',
  ),
  ...refuse('open_by_handle_at', 'name_to_handle_at', 'fanotify_init', 'lookup_dcookie', 'modify_ldt'),
  // The machine itself: modules, kexec, reboot, swap, quotas, clocks, accounting, I/O ports, the kernel log.
  ...refuse('init_module', 'finit_module', 'delete_module', 'kexec_load', 'kexec_file_load', 'reboot', 'swapon', 'swapoff'),
  ...refuse(
    'quotactl',
    'quotactl_fd',
    'settimeofday',
    'clock_settime',
    'clock_adjtime',
    'adjtimex',
    'acct',
    'syslog',
    'vhangup',
    'iopl',
    'ioperm',
  ),
  ...refuse('sethostname', 'setdomainname'),
  // personality may only be queried (0xffffffff): any change (no ASLR, READ_IMPLIES_EXEC) has a bit clear, and is refused.
  ...Array.from({ length: 32 }, (_, bit): SeccompRule => ({
    syscall: 'personality',
    errno: EPERM,
    when: [{ arg: 0, op: 'masked_eq', mask: 2 ** bit, value: 0 }],
  })),
  // The low 32 bits only: the kernel ignores the rest, so a request with high bits set must not slip by.
  ...TERMINAL_INJECTION.map((request): SeccompRule => ({
    syscall: 'ioctl',
    errno: EPERM,
    when: [{ arg: 1, op: 'masked_eq', mask: 0xffffffff, value: request }],
  })),
];

/** The compiler: Debian's Python with python3-seccomp (libseccomp's own binding). */
const COMPILER = { python: '/usr/bin/python3', script: path.join(__dirname, 'seccomp_filter.py') };

/**
 * The rules as a classic BPF program for this machine's architecture, in the
 * form bubblewrap's `--seccomp FD` and `--add-seccomp-fd FD` read. Throws,
 * saying what to install, when libseccomp's Python binding is missing.
 */
export function compileSeccomp(rules: readonly SeccompRule[] = SECCOMP_RULES): Buffer {
  const run = spawnSync(COMPILER.python, [COMPILER.script], { input: JSON.stringify(rules), stdio: ['pipe', 'pipe', 'pipe'] });
  if (run.error || run.status !== 0 || run.stdout.length === 0) {
    const why = run.error ? run.error.message : run.stderr.toString('utf8').trim().split('\n').at(-1);
    throw new Error(
      `cannot compile the sandbox's seccomp filter with ${COMPILER.python} ${COMPILER.script}: ${why}. Install Debian's python3-seccomp (apt-get install python3-seccomp)`,
    );
  }
  // A classic BPF program is an array of 8-byte instructions.
  if (run.stdout.length % 8 !== 0) throw new Error(`the seccomp compiler wrote ${run.stdout.length} bytes, not whole BPF instructions`);
  return run.stdout;
}
