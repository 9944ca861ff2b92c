#!/usr/bin/env python3
"""Write the OCI config.json of one pod container for runc.

Usage: runc-config.py OUT.json ROOTFS NETNS SECCOMP.json HOSTNAME [options] -- ARGS...
  --env VAR=value      (repeatable) the process's environment
  --ro SRC[:DST]       (repeatable) a read-only bind mount (DST defaults to SRC)
  --rw SRC:DST         (repeatable) a read-write bind mount (a volume)
  --userns HOSTID      a user namespace of its own: container uids and gids
                       0-65535 are HOSTID-HOSTID+65535 on the host, as
                       Kubernetes gives a pod with hostUsers: false

The container is what containerd makes of a pod's container by default:
its own PID, IPC, UTS and mount namespaces, the network namespace NETNS
(made beforehand with `ip netns add`, as the CNI plugin does for the pod's
sandbox), containerd's default capability set (pkg/oci/spec.go,
defaultUnixCaps), the seccomp profile SECCOMP.json (contrib/pods/seccomp.json:
containerd's default profile), runc's default mounts, masked and read-only
paths (`runc spec`), and a read-only root file system ROOTFS.
"""
import json
import sys

# containerd's defaultUnixCaps (pkg/oci/spec.go): what a pod's container gets
# unless its securityContext adds or drops capabilities
CAPS = ["CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER",
        "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID",
        "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
        "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"]


def main(argv):
    if "--" not in argv or len(argv[:argv.index("--")]) < 6:
        sys.exit(__doc__)
    sep = argv.index("--")
    out, rootfs, netns, seccomp, hostname = argv[1:6]
    opts, args = argv[6:sep], argv[sep + 1:]
    env, mounts, userns = [], [], None
    for i in range(0, len(opts), 2):
        opt, val = opts[i], opts[i + 1]
        if opt == "--env":
            env.append(val)
        elif opt == "--userns":
            userns = int(val)
        elif opt in ("--ro", "--rw"):
            src, _, dst = val.partition(":")
            mounts.append({"destination": dst or src, "type": "bind",
                           "source": src,
                           "options": ["rbind", "nosuid", "nodev",
                                       "ro" if opt == "--ro" else "rw"]})
        else:
            sys.exit(f"runc-config.py: unknown option {opt}")
    with open(seccomp) as f:
        profile = json.load(f)
    profile.pop("_comment", None)

    config = {
        "ociVersion": "1.0.2-dev",
        "process": {
            "terminal": False,
            "user": {"uid": 0, "gid": 0},
            "args": args,
            "env": env,
            "cwd": "/",
            "capabilities": {k: CAPS for k in
                             ("bounding", "effective", "permitted")},
            # Kubernetes' default allowPrivilegeEscalation: true
            "noNewPrivileges": False,
        },
        "root": {"path": rootfs, "readonly": True},
        "hostname": hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc"},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666",
                         "mode=0620", "gid=5"]},
            # the pod's own /dev/shm, as containerd gives the sandbox
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm",
             "options": ["nosuid", "noexec", "nodev", "mode=1777",
                         "size=1g"]},
            {"destination": "/dev/mqueue", "type": "mqueue",
             "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs",
             "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/tmp", "type": "tmpfs", "source": "tmpfs",
             "options": ["nosuid", "nodev", "mode=1777"]},
        ] + mounts,
        "linux": {
            "namespaces": [{"type": "pid"}, {"type": "ipc"}, {"type": "uts"},
                           {"type": "mount"},
                           {"type": "network", "path": netns}],
            "seccomp": profile,
            "maskedPaths": ["/proc/acpi", "/proc/asound", "/proc/kcore",
                            "/proc/keys", "/proc/latency_stats",
                            "/proc/timer_list", "/proc/timer_stats",
                            "/proc/sched_debug", "/sys/firmware",
                            "/proc/scsi"],
            "readonlyPaths": ["/proc/bus", "/proc/fs", "/proc/irq",
                              "/proc/sys", "/proc/sysrq-trigger"],
        },
    }
    if userns is not None:
        linux = config["linux"]
        linux["namespaces"].insert(0, {"type": "user"})
        linux["uidMappings"] = [{"containerID": 0, "hostID": userns,
                                 "size": 65536}]
        linux["gidMappings"] = linux["uidMappings"]
        # the network namespace (ip netns add) belongs to the host's user
        # namespace: sysfs cannot be mounted from ours; bind the host's
        for m in config["mounts"]:
            if m["destination"] == "/sys":
                m.update(type="bind", source="/sys",
                         options=["rbind", "nosuid", "noexec", "nodev", "ro"])
    with open(out, "w") as f:
        json.dump(config, f, indent=1)


if __name__ == "__main__":
    main(sys.argv)
