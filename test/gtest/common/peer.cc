/*
 * Multi-process test peers (see peer.h).
 */
#include "peer.h"

extern "C" {
#include "cuda_ipc_ns_scm.h"

/* the mapping cache's (cuda_ipc_ns_cache.h), in a binary that links the
 * module: the suite does, test/nixl's nixl_pods does not */
void uct_cuda_ipc_ns_cache_reap(void) __attribute__((weak));
}

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <grp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <unistd.h>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#ifndef __NR_pidfd_getfd
#  define __NR_pidfd_getfd 438
#endif


namespace test {

static const char *PEER_FD_ENV = "CUDA_IPC_NS_TEST_PEER_FD";

static std::map<std::string, peer_func_t> &peer_roles()
{
    static std::map<std::string, peer_func_t> roles;
    return roles;
}


peer_role_registrar::peer_role_registrar(const char *name, peer_func_t func)
{
    peer_roles()[name] = func;
}


bool channel::send(const void *buf, size_t len, int fd_to_pass) const
{
    return uct_cuda_ipc_ns_scm_send_fd(m_fd, buf, len, fd_to_pass,
                                       MSG_NOSIGNAL) == UCS_OK;
}


ssize_t channel::recv(void *buf, size_t len, int timeout_ms, int *fd_p) const
{
    struct pollfd pfd = {m_fd, POLLIN, 0};
    size_t rx_len;
    int ret, fd;

    if (fd_p != nullptr) {
        *fd_p = -1;
    }

    do {
        ret = poll(&pfd, 1, hang_guard_ms(timeout_ms));
    } while ((ret < 0) && (errno == EINTR));
    if ((ret <= 0) ||
        (uct_cuda_ipc_ns_scm_recv_fd(m_fd, buf, len, 0, &rx_len, &fd) !=
         UCS_OK)) {
        return -1;
    }

    if (fd_p != nullptr) {
        *fd_p = fd;
    } else if (fd >= 0) {
        close(fd);
    }
    return rx_len;
}


/* seccomp filter: pidfd_getfd fails with EPERM, as under Docker's default
 * profile without CAP_SYS_PTRACE */
static void block_pidfd_getfd()
{
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_pidfd_getfd, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {(unsigned short)(sizeof(filter) / sizeof(filter[0])),
                              filter};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
        syscall(__NR_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog)) {
        perror("seccomp");
        _exit(120);
    }
}


static int peer_staging_collect(struct dl_phdr_info *info, size_t size,
                                void *arg)
{
    auto *paths = static_cast<std::vector<std::string>*>(arg);
    const char *name = info->dlpi_name;

    if ((name != nullptr) && (name[0] == '/') && strncmp(name, "/usr/", 5) &&
        strncmp(name, "/lib", 4)) {
        paths->push_back(name);
    }
    return 0;
}


std::string peer_staging::copy_in(const std::string &path)
{
    std::string base = path.substr(path.rfind('/') + 1);
    std::string dest = m_dir + "/" + base;
    int in, out;
    char buf[65536];
    ssize_t n;

    in = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) {
        throw std::runtime_error("staging: cannot open " + path);
    }
    out = open(dest.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0755);
    if (out < 0) {
        close(in);
        throw std::runtime_error("staging: cannot create " + dest);
    }
    m_files.push_back(dest);
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, n) != n) {
            n = -1;
            break;
        }
    }
    close(in);
    close(out);
    if (n < 0) {
        throw std::runtime_error("staging: cannot copy " + path);
    }
    return dest;
}


void peer_staging::stage(const std::string &exe)
{
    char tmpl[] = "/tmp/cuda_ipc_ns_peer.XXXXXX";
    std::vector<std::string> libs;
    const char *driver = getenv("UCX_CUDA_IPC_NS_DRIVER");

    if (mkdtemp(tmpl) == nullptr) {
        throw std::runtime_error("staging: mkdtemp failed");
    }
    m_dir = tmpl;
    if (chmod(m_dir.c_str(), 0755)) {
        throw std::runtime_error("staging: chmod failed");
    }

    m_exe = copy_in(exe);
    dl_iterate_phdr(peer_staging_collect, &libs);
    for (auto &lib : libs) {
        std::string base = lib.substr(lib.rfind('/') + 1);
        if ((lib != exe) && (access((m_dir + "/" + base).c_str(), F_OK))) {
            copy_in(lib);
        }
    }
    if ((driver != nullptr) && (driver[0] == '/')) {
        std::string base(strrchr(driver, '/') + 1);
        m_driver = m_dir + "/" + base;
        if (access(m_driver.c_str(), F_OK)) {
            copy_in(driver);
        }
    }
}


peer_staging::~peer_staging()
{
    for (auto &f : m_files) {
        unlink(f.c_str());
    }
    if (!m_dir.empty()) {
        rmdir(m_dir.c_str());
    }
}


/* In pid 1 of a new PID namespace: go on as its pid @a number (the next
 * pid the kernel gives there is ns_last_pid + 1), pid 1 relaying its exit
 * status as the namespace's init */
static void spawn_with_pid_number(uint32_t number)
{
    FILE *f = fopen("/proc/sys/kernel/ns_last_pid", "w");
    pid_t child;
    int status;

    if ((f == nullptr) || (fprintf(f, "%u", number - 1) < 0) || fclose(f)) {
        perror("writing /proc/sys/kernel/ns_last_pid");
        _exit(120);
    }
    child = fork();
    if (child < 0) {
        _exit(124);
    } else if (child == 0) {
        if ((uint32_t)getpid() != number) {
            fprintf(stderr, "peer: pid %d, not %u\n", (int)getpid(), number);
            _exit(120);
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        return;
    }
    while ((waitpid(child, &status, 0) < 0) && (errno == EINTR)) {
    }
    _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
}


/* The boot id of emulated node @a node: a UUID made of its name */
static std::string node_boot_id(const std::string &node)
{
    uint64_t h = 0xcbf29ce484222325ull, l;
    char id[40];

    for (char c : node) {
        h = (h ^ (unsigned char)c) * 0x100000001b3ull;
    }
    l = h * 0x9e3779b97f4a7c15ull;
    snprintf(id, sizeof(id), "%08x-%04x-4%03x-a%03x-%012llx",
             (unsigned)(h >> 32), (unsigned)(h >> 16) & 0xffff,
             (unsigned)h & 0xfff, (unsigned)(l >> 52) & 0xfff,
             (unsigned long long)(l & 0xffffffffffffull));
    return id;
}


/* In the forked child: become a process of node @a node (peer_options) */
static void become_node(const std::string &node)
{
    const char *boot_id = "/proc/sys/kernel/random/boot_id";
    char path[]         = "/tmp/peer-boot-id.XXXXXX";
    std::string id      = node_boot_id(node) + "\n";
    int fd;

    if (unshare(CLONE_NEWUTS | CLONE_NEWNS) ||
        mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) ||
        sethostname(node.c_str(), node.size())) {
        perror("a UTS namespace for the node");
        _exit(121);
    }
    fd = mkstemp(path);
    if ((fd < 0) || (write(fd, id.c_str(), id.size()) != (ssize_t)id.size()) ||
        fchmod(fd, 0444) || mount(path, boot_id, NULL, MS_BIND, NULL)) {
        perror("a boot id for the node");
        _exit(121);
    }
    close(fd);
    unlink(path);
    setenv("CUDASIM_NODE", node.c_str(), 1);
}


/* In a new user namespace: map @a uid and @a gid, ours in the parent one, on
 * themselves (a process may map its own ids without a capability there) */
static bool map_own_ids(uid_t uid, gid_t gid)
{
    std::string uid_map = std::to_string(uid) + " " + std::to_string(uid) + " 1";
    std::string gid_map = std::to_string(gid) + " " + std::to_string(gid) + " 1";
    const std::pair<const char*, std::string> maps[] = {
        {"/proc/self/setgroups", "deny"}, /* before gid_map, unprivileged */
        {"/proc/self/uid_map", uid_map},
        {"/proc/self/gid_map", gid_map}};

    for (const auto &m : maps) {
        FILE *f = fopen(m.first, "w");
        if ((f == nullptr) || (fputs(m.second.c_str(), f) < 0) || fclose(f)) {
            fprintf(stderr, "peer: writing %s: %s\n", m.first, strerror(errno));
            return false;
        }
    }
    return true;
}


/* Runs in the forked child: never returns */
static void peer_exec(const std::string &exe, const std::string &role,
                      const peer_options &opts, int fd,
                      const peer_staging &staging)
{
    if (opts.new_net_ns) {
        /* as `ip netns exec`: a mount namespace with a sysfs of the new
         * network namespace, whose /sys/class/net UCX 1.22 reads to find
         * network devices (the inherited sysfs shows the old ones) */
        if (unshare(CLONE_NEWNET | CLONE_NEWNS)) {
            perror("unshare(CLONE_NEWNET | CLONE_NEWNS)");
            _exit(121);
        }
        if (mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) ||
            umount2("/sys", MNT_DETACH) ||
            mount("sysfs", "/sys", "sysfs", 0, NULL)) {
            perror("remounting /sys in the new network namespace");
            _exit(121);
        }
    }
    if (opts.new_user_ns) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        if (unshare(CLONE_NEWUSER)) {
            perror("unshare(CLONE_NEWUSER)");
            _exit(122);
        }
        if (opts.map_own_uid && !map_own_ids(uid, gid)) {
            _exit(122);
        }
    }
    if (opts.new_pid_ns) {
        /* the caller's children enter the new namespace: fork once more so
         * the peer is its pid 1, and relay its exit status */
        if (unshare(CLONE_NEWPID)) {
            perror("unshare(CLONE_NEWPID)");
            _exit(123);
        }
        pid_t child = fork();
        if (child < 0) {
            _exit(124);
        } else if (child > 0) {
            int status;
            while ((waitpid(child, &status, 0) < 0) && (errno == EINTR)) {
            }
            _exit(WIFEXITED(status) ? WEXITSTATUS(status) :
                  128 + WTERMSIG(status));
        }
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        /* as in a pod: a /proc of the new PID namespace. The inherited one
         * shows the parent namespace's processes, so /proc/<our pid> is
         * another process (pid 1 is the machine's init), and the CUDA
         * driver's cuInit fails in it (driver 580:
         * CUDA_ERROR_OPERATING_SYSTEM) */
        if (unshare(CLONE_NEWNS) ||
            mount(NULL, "/", NULL, MS_REC | MS_SLAVE, NULL) ||
            mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                  NULL)) {
            perror("mounting a /proc of the new PID namespace");
            _exit(126);
        }
        if (opts.pid_number > 1) {
            spawn_with_pid_number(opts.pid_number);
        }
    }
    if (!opts.node.empty()) {
        become_node(opts.node);
    }
    if (opts.block_pidfd_getfd) {
        block_pidfd_getfd();
    }
    if (opts.uid >= 0) {
        if (setgroups(0, nullptr) || setresgid(opts.uid, opts.uid, opts.uid) ||
            setresuid(opts.uid, opts.uid, opts.uid)) {
            perror("setuid");
            _exit(125);
        }
    }

    if (!staging.dir().empty()) {
        /* run from the copies: the build tree may be closed to this uid */
        if (chdir(staging.dir().c_str())) {
            perror("chdir");
            _exit(127);
        }
        setenv("LD_LIBRARY_PATH", staging.dir().c_str(), 1);
        if (!staging.driver().empty()) {
            setenv("UCX_CUDA_IPC_NS_DRIVER", staging.driver().c_str(), 1);
        }
    }

    char fd_str[16];
    snprintf(fd_str, sizeof(fd_str), "%d", fd);
    setenv(PEER_FD_ENV, fd_str, 1);
    std::string arg = "--peer=" + role;
    execl(exe.c_str(), exe.c_str(), arg.c_str(), (char*)nullptr);
    perror("execl");
    _exit(126);
}


peer::peer(const std::string &role, const peer_options &opts) :
    m_pid(-1), m_relay(opts.new_pid_ns), m_waited(false)
{
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    int sv[2];

    if (peer_roles().find(role) == peer_roles().end()) {
        throw std::runtime_error("unknown peer role " + role);
    }
    if (len <= 0) {
        throw std::runtime_error("readlink(/proc/self/exe) failed");
    }
    exe[len] = '\0';
    if (opts.uid >= 0) {
        m_staging.stage(exe);
    }

    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) {
        throw std::runtime_error("socketpair failed");
    }

    fflush(stdout);
    fflush(stderr);
    m_pid = fork();
    if (m_pid < 0) {
        close(sv[0]);
        close(sv[1]);
        throw std::runtime_error("fork failed");
    } else if (m_pid == 0) {
        close(sv[0]);
        /* the peer's end survives exec */
        fcntl(sv[1], F_SETFD, 0);
        peer_exec(m_staging.exe().empty() ? exe : m_staging.exe(), role, opts,
                  sv[1], m_staging);
    }

    close(sv[1]);
    m_chan = channel(sv[0]);
}


/* a pidfd becomes readable when the process exits: poll() on it is the
 * event; timeout_ms is a safety net that turns a hang into a failure */
int peer::wait(int timeout_ms)
{
    int status = 0;
    int pidfd  = (int)syscall(SYS_pidfd_open, m_pid, 0);
    bool timed_out = false;
    pid_t ret;

    if (pidfd >= 0) {
        struct pollfd pfd = {pidfd, POLLIN, 0};
        int n;
        do {
            n = poll(&pfd, 1, hang_guard_ms(timeout_ms));
        } while ((n < 0) && (errno == EINTR));
        close(pidfd);
        if (n == 0) {
            ::kill(m_pid, SIGKILL);
            timed_out = true;
        }
    }
    /* exited (or killed just above, or no pidfd: a plain blocking wait) */
    do {
        ret = waitpid(m_pid, &status, 0);
    } while ((ret < 0) && (errno == EINTR));
    m_waited = true;
    if ((ret != m_pid) || timed_out) {
        return -1;
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}


bool peer::kill()
{
    pid_t target = m_pid;

    if (m_relay) {
        /* the relay's one child (procfs lists a task's children) */
        std::string path = "/proc/" + std::to_string(m_pid) + "/task/" +
                           std::to_string(m_pid) + "/children";
        FILE *file = fopen(path.c_str(), "r");
        int child  = -1;
        if ((file == nullptr) || (fscanf(file, "%d", &child) != 1)) {
            fprintf(stderr, "peer: no child of relay %d in %s\n", m_pid,
                    path.c_str());
            child = -1;
        }
        if (file != nullptr) {
            fclose(file);
        }
        if (child <= 0) {
            return false;
        }
        target = child;
    }
    return ::kill(target, SIGKILL) == 0;
}


peer::~peer()
{
    if (m_chan.fd() >= 0) {
        close(m_chan.fd());
    }
    if ((m_pid > 0) && !m_waited) {
        wait(10000);
    }
}


bool peer_main(int argc, char **argv, int *exit_code)
{
    const char *prefix = "--peer=";
    const char *fd_str = getenv(PEER_FD_ENV);

    if ((argc < 2) || strncmp(argv[1], prefix, strlen(prefix)) ||
        (fd_str == nullptr)) {
        return false;
    }

    auto it = peer_roles().find(argv[1] + strlen(prefix));
    if (it == peer_roles().end()) {
        fprintf(stderr, "unknown peer role %s\n", argv[1]);
        *exit_code = 127;
        return true;
    }

    int fd = atoi(fd_str);
    fcntl(fd, F_SETFD, FD_CLOEXEC);
    unsetenv(PEER_FD_ENV);
    *exit_code = it->second(channel(fd));
    close(fd);
    return true;
}


int count_open_fds()
{
    DIR *dir;
    int count = 0;

    /* a peer that an earlier test left dead in the cache holds its pidfd
     * and UCX's async thread (its epoll fd and wakeup pipe) until the next
     * use of the cache: that use may come inside the test being measured */
    if (uct_cuda_ipc_ns_cache_reap != nullptr) {
        uct_cuda_ipc_ns_cache_reap();
    }
    dir = opendir("/proc/self/fd");
    if (dir == nullptr) {
        return -1;
    }
    while (readdir(dir) != nullptr) {
        ++count;
    }
    closedir(dir);
    return count - 3; /* ".", ".." and the directory's own fd */
}


int count_memfd_mappings()
{
    FILE *maps = fopen("/proc/self/maps", "r");
    char line[4096];
    int count = 0;

    if (maps == nullptr) {
        return -1;
    }
    while (fgets(line, sizeof(line), maps) != nullptr) {
        count += (strstr(line, "/memfd:") != nullptr);
    }
    fclose(maps);
    return count;
}


int count_open_fds_below(int limit)
{
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *entry;
    int count = 0, fd;

    if (dir == nullptr) {
        return -1;
    }
    while ((entry = readdir(dir)) != nullptr) {
        fd = atoi(entry->d_name);
        count += (entry->d_name[0] != '.') && (fd != dirfd(dir)) &&
                 (fd < limit);
    }
    closedir(dir);
    return count;
}


std::map<int, std::string> open_fd_targets()
{
    std::map<int, std::string> targets;
    DIR *dir = opendir("/proc/self/fd");
    struct dirent *entry;
    char path[64], target[256];
    ssize_t len;
    int fd;

    if (dir == nullptr) {
        return targets;
    }
    while ((entry = readdir(dir)) != nullptr) {
        fd = atoi(entry->d_name);
        if ((entry->d_name[0] == '.') || (fd == dirfd(dir))) {
            continue;
        }
        snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
        len = readlink(path, target, sizeof(target) - 1);
        if (len >= 0) { /* else closed meanwhile */
            targets[fd] = std::string(target, len);
        }
    }
    closedir(dir);
    return targets;
}


bool send_with_fds(int sock, const void *buf, size_t len,
                   const std::vector<int> &fds)
{
    std::vector<char> cbuf(CMSG_SPACE(sizeof(int) * fds.size()));
    struct iovec iov  = {const_cast<void*>(buf), len};
    struct msghdr msg = {};

    msg.msg_iov        = &iov;
    msg.msg_iovlen     = 1;
    if (!fds.empty()) { /* no control message for no fds */
        msg.msg_control    = cbuf.data();
        msg.msg_controllen = cbuf.size();
        struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level = SOL_SOCKET;
        cmsg->cmsg_type  = SCM_RIGHTS;
        cmsg->cmsg_len   = CMSG_LEN(sizeof(int) * fds.size());
        memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    return sendmsg(sock, &msg, MSG_NOSIGNAL) == (ssize_t)len;
}

} // namespace test
