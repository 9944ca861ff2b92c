#!/usr/bin/env python3
"""Mount SRC at DST as an idmapped mount (mount_setattr MOUNT_ATTR_IDMAP),
as a container runtime mounts a volume into a pod with hostUsers: false
(Kubernetes 1.30+ with runc 1.2+; Debian's runc 1.1.5 makes no idmapped
mounts, so contrib/pods-runc.sh makes them itself and binds the result).

Usage: idmap-mount.py SRC DST HOSTID [COUNT]

The mount's idmapping is the user namespace a pod gets: ids 0..COUNT-1
(65536) on host ids HOSTID..  Through it a file the disk says uid 0 owns
is seen as host uid HOSTID, which the pod's namespace shows as its root;
a file the pod's root creates is written as uid 0. Two pods whose
mounts of one directory are idmapped this way both see it as their root's.
Needs root; the kernel's idmapped mounts (Linux 5.12, the file system's
support: ext4, xfs, btrfs, tmpfs from 6.3).
"""
import ctypes
import os
import sys

SYS_open_tree, SYS_move_mount, SYS_mount_setattr = 428, 429, 442
OPEN_TREE_CLONE, OPEN_TREE_CLOEXEC = 1, 0o2000000
AT_FDCWD, AT_EMPTY_PATH, AT_RECURSIVE = -100, 0x1000, 0x8000
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_IDMAP = 0x00100000
CLONE_NEWUSER = 0x10000000

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class MountAttr(ctypes.Structure):
    _fields_ = [("attr_set", ctypes.c_uint64), ("attr_clr", ctypes.c_uint64),
                ("propagation", ctypes.c_uint64), ("userns_fd", ctypes.c_uint64)]


def check(ret, what):
    if ret < 0:
        err = ctypes.get_errno()
        sys.exit(f"idmap-mount: {what}: {os.strerror(err)}")
    return ret


def userns_fd(hostid, count):
    """An fd of a user namespace mapping 0..count-1 on hostid..: a child
    unshares one, we write its maps and open it, the child exits"""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(w)
        if libc.unshare(CLONE_NEWUSER) != 0:
            os._exit(1)
        os.read(r, 1)  # wait until the parent opened the namespace
        os._exit(0)
    os.close(r)
    try:
        ns = f"/proc/{pid}/ns/user"
        for _ in range(1000):  # until the child has unshared
            if os.readlink(ns) != os.readlink("/proc/self/ns/user"):
                break
            os.sched_yield()
        else:
            sys.exit("idmap-mount: the child made no user namespace")
        for f in ("uid_map", "gid_map"):
            with open(f"/proc/{pid}/{f}", "w") as m:
                m.write(f"0 {hostid} {count}\n")
        return os.open(ns, os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(w)
        os.waitpid(pid, 0)


def main():
    if len(sys.argv) not in (4, 5):
        sys.exit(__doc__.split("\n\n")[1])
    src, dst, hostid = sys.argv[1], sys.argv[2], int(sys.argv[3])
    count = int(sys.argv[4]) if len(sys.argv) == 5 else 65536
    nsfd = userns_fd(hostid, count)
    tree = check(libc.syscall(SYS_open_tree, AT_FDCWD, src.encode(),
                              OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE),
                 f"open_tree({src})")
    attr = MountAttr(MOUNT_ATTR_IDMAP, 0, 0, nsfd)
    check(libc.syscall(SYS_mount_setattr, tree, b"", AT_EMPTY_PATH | AT_RECURSIVE,
                       ctypes.byref(attr), ctypes.c_size_t(ctypes.sizeof(attr))),
          f"mount_setattr(MOUNT_ATTR_IDMAP) of {src}")
    check(libc.syscall(SYS_move_mount, tree, b"", AT_FDCWD, dst.encode(),
                       MOVE_MOUNT_F_EMPTY_PATH), f"move_mount to {dst}")


if __name__ == "__main__":
    main()
