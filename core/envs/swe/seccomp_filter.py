"""Compiles the sandbox's seccomp rules (seccomp.ts) into a classic BPF program with libseccomp.

Reads the rules as JSON on stdin and writes the program, as bubblewrap's
--seccomp reads it, to stdout. libseccomp does what is easy to get wrong by
hand: syscall numbers for the machine's own architecture, the audit-arch check
that refuses other architectures' syscalls (i386 through int 0x80, x32) and the
64-bit argument comparisons.

Run with Debian's Python (python3-seccomp is its libseccomp binding).
"""
import errno
import json
import sys

import seccomp

OPS = {"eq": seccomp.EQ, "ne": seccomp.NE, "masked_eq": seccomp.MASKED_EQ}


def condition(spec):
    if spec["op"] == "masked_eq":
        return seccomp.Arg(spec["arg"], seccomp.MASKED_EQ, spec["mask"], spec["value"])
    return seccomp.Arg(spec["arg"], OPS[spec["op"]], spec["value"])


def main():
    rules = json.load(sys.stdin)
    program = seccomp.SyscallFilter(seccomp.ALLOW)
    # Another architecture's syscall (a 32-bit one on a 64-bit kernel) is refused, not run unchecked.
    program.set_attr(seccomp.Attr.ACT_BADARCH, seccomp.ERRNO(errno.EPERM))
    for rule in rules:
        number = seccomp.resolve_syscall(seccomp.Arch.NATIVE, rule["syscall"])
        if number == -1:
            sys.exit(f"seccomp rules: no syscall named {rule['syscall']!r}")
        # A syscall the machine's architecture does not have (iopl on arm64) needs no rule there.
        if number < 0:
            continue
        program.add_rule(seccomp.ERRNO(rule["errno"]), rule["syscall"], *[condition(c) for c in rule.get("when", [])])
    program.export_bpf(sys.stdout)


if __name__ == "__main__":
    main()
