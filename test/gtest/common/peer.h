/*
 * Multi-process tests: a peer is this test binary, fork()ed and exec()ed
 * again in a "peer role", optionally in new namespaces, under a seccomp
 * filter or as another uid. Test and peer talk over a dedicated
 * SOCK_SEQPACKET socketpair, never stdout (UCX and drivers print there).
 * exec() gives the peer a clean process, as a CUDA driver requires.
 */
#ifndef TEST_COMMON_PEER_H
#define TEST_COMMON_PEER_H

#include "common/hang_guard.h"

#include <sys/types.h>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>


namespace test {

struct peer_options {
    bool new_pid_ns        = false; /* peer is pid 1 of a new PID namespace */
    /* with new_pid_ns: the peer's pid there instead of 1 (0: 1), as pods
     * started alike get alike pids; pid 1 then waits for it */
    uint32_t pid_number    = 0;
    bool new_net_ns        = false; /* peer gets a new network namespace */
    bool new_user_ns       = false; /* peer gets a new user namespace */
    /* with new_user_ns: it maps the peer's own uid and gid (root's, 0 on 0)
     * and nothing else, as a pod's maps only its range: other uids show as
     * the overflow uid there */
    bool map_own_uid       = false;
    bool block_pidfd_getfd = false; /* seccomp: pidfd_getfd fails with EPERM */
    int  uid               = -1;    /* run as this uid/gid (after the above) */
    /* not empty: the peer is on another node of that name, as UCX and the
     * emulator see it: a UTS namespace with it as host name, a boot id of
     * its own (UCX's system id, /proc/sys/kernel/random/boot_id) and
     * CUDASIM_NODE (test/cudasim/README.md, "Nodes"); with new_net_ns, the
     * node's own network */
    std::string node;
};


/*
 * What a peer of another uid executes: that uid may not enter the build
 * tree (a clone under /root is 0700), so the test binary, the shared objects
 * it loaded from outside /usr and /lib, and the driver named by
 * UCX_CUDA_IPC_NS_DRIVER are copied into a fresh 0755 directory under /tmp;
 * the peer runs from there with LD_LIBRARY_PATH and the driver variable
 * pointing into it. The directory is removed with this object.
 */
class peer_staging {
public:
    peer_staging() = default;
    ~peer_staging();
    peer_staging(const peer_staging&) = delete;
    peer_staging &operator=(const peer_staging&) = delete;

    /* copies everything; throws on failure */
    void stage(const std::string &exe);

    const std::string &dir() const { return m_dir; }
    const std::string &exe() const { return m_exe; }
    const std::string &driver() const { return m_driver; }

private:
    std::string copy_in(const std::string &path);

    std::string              m_dir;
    std::string              m_exe;
    std::string              m_driver; /* empty: the variable is kept */
    std::vector<std::string> m_files;
};


/* Channel between a test and its peer: messages keep their boundaries */
class channel {
public:
    explicit channel(int fd = -1) : m_fd(fd) {}
    int fd() const { return m_fd; }

    /* send one message; false on error */
    bool send(const void *buf, size_t len, int fd_to_pass = -1) const;
    /* receive one message of at most len bytes within timeout_ms; returns
     * its length, or -1 on error/timeout/EOF. *fd_p gets a passed fd. */
    ssize_t recv(void *buf, size_t len, int timeout_ms = 30000,
                 int *fd_p = nullptr) const;

    template <typename T> bool send_obj(const T &obj, int fd_to_pass = -1) const {
        return send(&obj, sizeof(obj), fd_to_pass);
    }
    template <typename T> bool recv_obj(T &obj, int timeout_ms = 30000,
                                        int *fd_p = nullptr) const {
        return recv(&obj, sizeof(obj), timeout_ms, fd_p) == (ssize_t)sizeof(obj);
    }

private:
    int m_fd;
};


class peer {
public:
    peer(const std::string &role, const peer_options &opts = peer_options());
    ~peer();
    peer(const peer&) = delete;
    peer &operator=(const peer&) = delete;

    const channel &chan() const { return m_chan; }
    pid_t pid() const { return m_pid; }

    /* wait for the peer; returns its exit status (or 128+signal, or -1 on
     * timeout, after which the peer is killed) */
    int wait(int timeout_ms = 60000);

    /* whether exit status @a status of wait() means the peer could not be
     * set up (namespaces, mounts, ids: peer.cc exits 120-126), so the test
     * skips rather than fails */
    static bool setup_failed(int status)
    {
        return (status >= 120) && (status <= 126);
    }

    /* SIGKILL the process that runs the role: in a PID namespace its pid 1,
     * not the relay pid() is (that one's death would reach it later, through
     * PR_SET_PDEATHSIG), so that wait() returns once the role is gone;
     * false when that process cannot be found */
    bool kill();

private:
    peer_staging m_staging; /* only for another uid; outlives the process */
    pid_t        m_pid;
    bool         m_relay;   /* m_pid relays for a peer in its PID namespace */
    channel      m_chan;
    bool         m_waited;
};


typedef int (*peer_func_t)(const channel &chan);

/* registers a peer role; use TEST_PEER_ROLE */
struct peer_role_registrar {
    peer_role_registrar(const char *name, peer_func_t func);
};

/* called from main(): runs the role named by --peer=NAME and returns true,
 * setting *exit_code; false when this process is not a peer */
bool peer_main(int argc, char **argv, int *exit_code);

/* number of open fds of this process, once the mapping cache destroyed the
 * dead peers that wait for its next use (uct_cuda_ipc_ns_cache_reap) */
int count_open_fds();
/* open descriptors of this process numbered below @a limit, -1 on error */
int count_open_fds_below(int limit);
/* mappings of memfds in this process (the emulator's device memory, own
 * and imported: an import holds no fd, only its mappings), -1 on error */
int count_memfd_mappings();

/* fd number -> what it is open to (readlink of /proc/self/fd/N), for each
 * open fd of this process but the directory's own */
std::map<int, std::string> open_fd_targets();

/* send one message with any number of fds attached, as a hostile peer may;
 * false on error */
bool send_with_fds(int sock, const void *buf, size_t len,
                   const std::vector<int> &fds);

} // namespace test


/* Define a peer role: the body runs in the peer process and returns its exit
 * code; `chan` talks to the test */
#define TEST_PEER_ROLE(_name) \
    static int test_peer_role_##_name(const test::channel &chan); \
    static test::peer_role_registrar test_peer_role_reg_##_name( \
            #_name, test_peer_role_##_name); \
    static int test_peer_role_##_name(const test::channel &chan)

#endif
