/*
 * Data-path tests: a peer process ("agent") driven over its channel. It
 * exports buffers (alloc, fill, check) and can import too (connect, copy),
 * so either side of a test can be the one that moves the data.
 */
#ifndef TEST_DATAPATH_AGENT_H
#define TEST_DATAPATH_AGENT_H

#include "uct_node.h"
#include "common/peer.h"

#include <memory>


namespace test {

/* What an agent's fd broker served (uct_cuda_ipc_ns_broker_serve_get_stats()) */
struct broker_stats {
    uint64_t layout_requests;
    uint64_t chunk_fds_requests; /* one round trip each */
    uint64_t chunk_fds_sent;
    uint64_t copies;             /* COPY requests its copiers launched */
};


struct agent_buffer {
    int      index;
    uint64_t addr;
    bytes_t  rkey;
};


class agent {
public:
    struct cmd;   /* one request on the channel */
    struct reply; /* its answer */

    agent(const peer_options &opts = peer_options());
    ~agent();

    bool ok() const { return m_ok; }
    pid_t pid() const { return m_peer->pid(); }      /* in our namespace */
    uint32_t remote_pid() const { return m_remote_pid; } /* in its own */
    const bytes_t &dev_addr() const { return m_dev_addr; }
    const bytes_t &iface_addr() const { return m_iface_addr; }

    agent_buffer alloc(buffer_kind kind, size_t size, uint32_t seed,
                       uint64_t hint = 0, int device = 0);
    bool fill(int index, uint32_t seed);
    /* bytes [offset, offset + size) only (size 0: to the end) */
    bool fill(int index, uint32_t seed, size_t offset, size_t size);
    bool check(int index, uint32_t seed, size_t offset, size_t size);
    bool free(int index);
    /* the agent imports: connect to @a node and copy to/from its buffer */
    bool connect(const uct_node &node);
    bool connect(const agent &other); /* to another agent's iface */
    ucs_status_t copy(bool is_put, int local_index, size_t size,
                      uint64_t remote_addr, const bytes_t &rkey,
                      size_t local_offset = 0);
    /* BUF_VMM_CHUNKS: a new allocation in place of chunk @a chunk */
    bool replace_chunk(int index, size_t chunk);
    /* the buffer registered again: its new key (empty on failure) */
    bytes_t reregister(int index);
    /* the agent's soft RLIMIT_NOFILE */
    bool set_nofile(size_t limit);

    /* asynchronous copies: an unpacked key kept by the agent (its index),
     * a zcopy posted on it without waiting (its number, in post order),
     * then progress until all posted complete: their numbers in completion
     * order, and the first error (UCS_OK if none) */
    int rkey_unpack(const bytes_t &rkey);
    bool post(bool is_put, int local_index, size_t size, uint64_t remote_addr,
              int rkey_index);
    ucs_status_t wait_posted(std::vector<int> *order);

    /* what the agent's iface reports: bandwidth (bytes/s) and streams of its
     * completion queue */
    bool query(double *bandwidth, unsigned *num_streams);

    /* the agent's own open fds (count_open_fds() there), those numbered
     * below @a below when not 0; -1 on error */
    int open_fds(int below = 0);
    /* returns once the agent's fd broker closed every connection it
     * accepted (uct_cuda_ipc_ns_broker_wait_idle() there) */
    bool wait_broker_idle();
    /* what the agent's fd broker served so far */
    bool broker_served(broker_stats *stats);
    /* uct_iface_event_arm(UCT_EVENT_SEND_COMP) of the agent's iface */
    ucs_status_t event_arm();
    /* whether the agent's iface event fd wakes within @a timeout_ms (a
     * hang guard: test/gtest/common/hang_guard.h) */
    bool event_wakes(int timeout_ms);
    /* the emulator's fault rules (CUDASIM_FAULTS), in the agent (false:
     * unsupported) */
    bool set_faults(const char *faults);
    /* the emulator's copy-engine hold, in the agent (false: unsupported) */
    bool hold_copies(bool hold, int device = -1);
    /* opens a connection to the fd broker named in @a rkey and sends no
     * request: a client that dies now dies in the middle of an fd exchange */
    bool broker_connect(const bytes_t &rkey);

    void kill_now();   /* SIGKILL, and reap it */

private:
    bool call(const cmd &c, reply *r);
    /* the agent answered UCS_OK */
    bool call_ok(const cmd &c);

    std::unique_ptr<peer> m_peer;
    bool                  m_ok = false;
    bool                  m_killed = false;
    uint32_t              m_remote_pid = 0;
    bytes_t               m_dev_addr;
    bytes_t               m_iface_addr;
};

} // namespace test

#endif
