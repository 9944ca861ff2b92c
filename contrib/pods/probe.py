#!/usr/bin/env python3
"""What a process may do where it runs: one line per fact, for
contrib/pods-runc.sh to compare with what a pod's container must be.

  pid N                       its pid in its PID namespace
  ns pid:[..] net:[..] ...    its namespaces
  uid_map IN OUT COUNT        its user namespace's first uid range
  CapEff HEX                  its effective capabilities
  Seccomp N                   2: a seccomp filter is applied
  SYSCALL allowed|EPERM|...   each call the runtime's profile refuses,
                              made where the kernel alone would allow it
                              (on the process itself, needing no capability)

x86_64 syscall numbers.
"""
import ctypes
import errno
import os

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long

NR = {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311,
      "unshare": 272, "pidfd_open": 434, "pidfd_getfd": 438, "mount": 165,
      "setns": 308}
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
PTRACE_TRACEME = 0


class IoVec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]


def call(name, *args):
    ctypes.set_errno(0)
    ret = libc.syscall(ctypes.c_long(NR[name]),
                       *[ctypes.c_long(a) for a in args])
    return ret, ctypes.get_errno()


def verdict(ret, err):
    return "allowed" if ret >= 0 else errno.errorcode.get(err, str(err))


def in_child(fn):
    """fn() in a forked child (a call that changes the process, such as
    ptrace(TRACEME) or unshare, leaves this one as it was); its verdict"""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.write(w, verdict(*fn()).encode())
        os._exit(0)
    os.close(w)
    out = os.read(r, 64).decode()
    os.waitpid(pid, 0)
    return out


def self_vm(name):
    buf = ctypes.create_string_buffer(b"probe", 8)
    dst = ctypes.create_string_buffer(8)
    local = IoVec(ctypes.cast(dst, ctypes.c_void_p), 8)
    remote = IoVec(ctypes.cast(buf, ctypes.c_void_p), 8)
    return call(name, os.getpid(), ctypes.addressof(local), 1,
                ctypes.addressof(remote), 1, 0)


def self_pidfd_getfd():
    pidfd, err = call("pidfd_open", os.getpid(), 0)
    if pidfd < 0:
        return pidfd, err
    ret = call("pidfd_getfd", pidfd, 0, 0)
    os.close(pidfd)
    return ret


def self_setns():
    fd = os.open("/proc/self/ns/net", os.O_RDONLY)
    ret = call("setns", fd, CLONE_NEWNET)
    os.close(fd)
    return ret


def main():
    print("pid", os.getpid())
    print("ns", " ".join(os.readlink(f"/proc/self/ns/{n}") for n in
                         ("pid", "net", "ipc", "uts", "mnt")))
    with open("/proc/self/uid_map") as f:
        print("uid_map", " ".join(f.readline().split()))
    with open("/proc/self/status") as f:
        for line in f:
            key, _, val = line.partition(":")
            if key in ("CapEff", "Seccomp"):
                print(key, val.strip())
    checks = {
        "pidfd_getfd": self_pidfd_getfd,
        "ptrace": lambda: call("ptrace", PTRACE_TRACEME, 0, 0, 0),
        "process_vm_readv": lambda: self_vm("process_vm_readv"),
        "process_vm_writev": lambda: self_vm("process_vm_writev"),
        "unshare": lambda: call("unshare", CLONE_NEWUSER),
        "mount": lambda: call("mount", 0, 0, 0, 0, 0),
        "setns": self_setns,
    }
    for name, fn in checks.items():
        print(name, in_child(fn))


if __name__ == "__main__":
    main()
