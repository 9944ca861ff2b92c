/*
 * Data-path tests: the agent peer (see agent.h) and its driver.
 */
#include "agent.h"

extern "C" {
#include "cuda_ipc_ns_iface.h"
#include "cuda_ipc_ns_rkey.h"
#include "cuda_ipc_ns_broker.h"
#include "cuda_ipc_ns_broker_serve.h"
}

#include <gtest/gtest.h>
#include <algorithm>
#include <cstring>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>


namespace test {

enum agent_op : uint32_t {
    AG_HELLO = 1, AG_ALLOC, AG_FILL, AG_CHECK, AG_FREE, AG_CONNECT, AG_COPY,
    AG_EXIT, AG_RKEY, AG_POST, AG_WAIT, AG_QUERY, AG_FDS, AG_IDLE, AG_HOLD,
    AG_BROKER_CONNECT, AG_REPLACE_CHUNK, AG_REREG, AG_NOFILE, AG_BROKER_STATS,
    AG_FAULTS, AG_ARM, AG_POLL
};


/* Connect to the fd broker named in a packed key and send nothing: a client
 * caught between connect() and its request. Returns the socket, or -1 */
static int agent_broker_connect(const uint8_t *rkey, size_t len)
{
    uct_cuda_ipc_ns_rkey_info_t info;
    struct sockaddr_un sun = {};
    int fd;

    if ((uct_cuda_ipc_ns_rkey_parse(rkey, len, &info) != UCS_OK) ||
        (info.broker_addr_len == 0) ||
        (info.broker_addr_len > sizeof(sun.sun_path))) {
        return -1;
    }
    sun.sun_family = AF_UNIX;
    memcpy(sun.sun_path, info.broker_addr, info.broker_addr_len);
    fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
    if ((fd >= 0) &&
        (connect(fd, (struct sockaddr*)&sun,
                 offsetof(struct sockaddr_un, sun_path) +
                 info.broker_addr_len) < 0)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

const int AGENT_MAX_POSTED = 64;

/* A completion that appends its number to the agent's completion order */
struct ordered_completion : completion {
    std::vector<int> *order;
    int              num;

    ordered_completion(std::vector<int> *o, int n) : order(o), num(n)
    {
        comp.func = cb;
    }
    static void cb(uct_completion_t *comp)
    {
        ordered_completion *self = static_cast<ordered_completion*>(
                ucs_container_of(comp, completion, comp));
        completion::cb(comp);
        self->order->push_back(self->num);
    }
};

struct agent::cmd {
    uint32_t op;
    uint32_t kind;
    uint32_t seed;
    int32_t  index;
    uint32_t is_put;
    int32_t  device;
    uint64_t size;
    uint64_t offset;
    uint64_t hint;
    uint64_t remote_addr;
    uint8_t  rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uint8_t  dev_addr[UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE];
    uint8_t  iface_addr[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE];
};

struct agent::reply {
    int32_t  status;
    int32_t  index;
    uint32_t pid;
    uint64_t addr;
    uint8_t  rkey[UCT_CUDA_IPC_NS_RKEY_PACKED_SIZE];
    uint8_t  dev_addr[UCT_CUDA_IPC_NS_DEVICE_ADDR_SIZE];
    uint8_t  iface_addr[UCT_CUDA_IPC_NS_IFACE_ADDR_SIZE];
};


/* The agent's loop: one command, one reply, until AG_EXIT or EOF */
TEST_PEER_ROLE(datapath_agent)
{
    uct_node node;
    uct_ep_h ep = nullptr;
    agent::cmd c;
    agent::reply r;
    std::vector<uct_rkey_bundle_t> rkeys;
    std::vector<std::unique_ptr<ordered_completion>> posted;
    std::vector<int> order;

    if (!node.ok()) {
        return 1;
    }

    while (chan.recv_obj(c, 600000)) {
        memset(&r, 0, sizeof(r));
        r.status = UCS_OK;
        switch (c.op) {
        case AG_HELLO: {
            bytes_t dev = node.dev_addr(), ifa = node.iface_addr();
            memcpy(r.dev_addr, dev.data(), dev.size());
            memcpy(r.iface_addr, ifa.data(), ifa.size());
            r.pid = getpid();
            break;
        }
        case AG_ALLOC:
            r.index = node.alloc((buffer_kind)c.kind, c.size, c.hint,
                                 c.device);
            if (r.index < 0) {
                r.status = UCS_ERR_NO_MEMORY;
                break;
            }
            node.fill(r.index, c.seed);
            r.addr = (uint64_t)node.buf(r.index).ptr;
            memcpy(r.rkey, node.rkey(r.index).data(), sizeof(r.rkey));
            break;
        case AG_FILL:
            node.fill(c.index, c.seed, c.offset, c.size);
            break;
        case AG_CHECK:
            r.status = node.check(c.index, c.seed, c.offset, c.size) ?
                       UCS_OK : UCS_ERR_IO_ERROR;
            break;
        case AG_FREE:
            node.free(c.index);
            break;
        case AG_CONNECT:
            ep = node.connect(bytes_t(c.dev_addr, c.dev_addr + sizeof(c.dev_addr)),
                              bytes_t(c.iface_addr,
                                      c.iface_addr + sizeof(c.iface_addr)));
            r.status = (ep != nullptr) ? UCS_OK : UCS_ERR_UNREACHABLE;
            break;
        case AG_COPY: {
            uct_rkey_bundle_t bundle;
            r.status = uct_rkey_unpack(node.component(), c.rkey, &bundle);
            if (r.status != UCS_OK) {
                break;
            }
            r.status = node.copy(ep, c.is_put,
                                 (char*)node.buf(c.index).ptr + c.offset,
                                 c.size, c.remote_addr, bundle.rkey);
            uct_rkey_release(node.component(), &bundle);
            break;
        }
        case AG_RKEY: {
            uct_rkey_bundle_t bundle;
            r.status = uct_rkey_unpack(node.component(), c.rkey, &bundle);
            if (r.status == UCS_OK) {
                r.index = (int)rkeys.size();
                rkeys.push_back(bundle);
            }
            break;
        }
        case AG_POST: {
            if ((c.offset >= rkeys.size()) ||
                ((int)posted.size() >= AGENT_MAX_POSTED)) {
                r.status = UCS_ERR_INVALID_PARAM;
                break;
            }
            posted.emplace_back(new ordered_completion(&order,
                                                       (int)posted.size()));
            completion *comp = posted.back().get();
            uct_iov_t iov    = {node.buf(c.index).ptr, c.size, nullptr, 0, 1};
            ucs_status_t st  = c.is_put ?
                    uct_ep_put_zcopy(ep, &iov, 1, c.remote_addr,
                                     rkeys[c.offset].rkey, &comp->comp) :
                    uct_ep_get_zcopy(ep, &iov, 1, c.remote_addr,
                                     rkeys[c.offset].rkey, &comp->comp);
            r.index = (int)posted.size() - 1;
            if (st != UCS_INPROGRESS) {
                comp->done   = true;
                comp->status = st;
                order.push_back(r.index);
            }
            r.status = UCS_STATUS_IS_ERR(st) ? st : UCS_OK;
            break;
        }
        case AG_WAIT: {
            /* progress until every posted op completed, noting the order in
             * which the completions were called */
            node.progress_until([&]() {
                return order.size() == posted.size();
            });
            r.status = (order.size() == posted.size()) ? UCS_OK :
                                                        UCS_ERR_TIMED_OUT;
            for (auto &comp : posted) {
                if ((r.status == UCS_OK) && (comp->status != UCS_OK)) {
                    r.status = comp->status;
                }
            }
            r.index = (int)order.size();
            for (size_t i = 0; i < order.size(); ++i) {
                r.rkey[i] = (uint8_t)order[i];
            }
            posted.clear();
            order.clear();
            break;
        }
        case AG_QUERY: {
            uct_iface_attr_t attr;
            uct_cuda_ipc_ns_iface_t *iface =
                    ucs_derived_of(node.iface(), uct_cuda_ipc_ns_iface_t);
            r.status = uct_iface_query(node.iface(), &attr);
            r.addr   = (uint64_t)attr.bandwidth.shared;
            r.index  = (int)iface->cq.num_streams;
            break;
        }
        case AG_FDS:
            r.index = (c.size == 0) ? count_open_fds() :
                      count_open_fds_below((int)c.size);
            break;
        case AG_IDLE:
            uct_cuda_ipc_ns_broker_wait_idle();
            break;
        case AG_BROKER_STATS: {
            uct_cuda_ipc_ns_broker_serve_stats_t stats;
            uct_cuda_ipc_ns_broker_serve_get_stats(&stats);
            broker_stats served = {stats.layout_requests,
                                   stats.chunk_fds_requests,
                                   stats.chunk_fds_sent, stats.copies};
            static_assert(sizeof(served) <= sizeof(r.rkey), "reply room");
            memcpy(r.rkey, &served, sizeof(served));
            break;
        }
        case AG_HOLD:
            r.status = test::hold_copies(c.device, c.is_put) ? UCS_OK :
                                                         UCS_ERR_UNSUPPORTED;
            break;
        case AG_BROKER_CONNECT: {
            /* kept open (leaked) until the agent exits or is killed */
            int fd   = agent_broker_connect(c.rkey, sizeof(c.rkey));
            r.status = (fd >= 0) ? UCS_OK : UCS_ERR_UNREACHABLE;
            r.index  = fd;
            break;
        }
        case AG_REPLACE_CHUNK:
            node.replace_chunk(c.index, c.offset);
            break;
        case AG_REREG:
            if (!node.reregister(c.index)) {
                r.status = UCS_ERR_NO_MEMORY;
                break;
            }
            memcpy(r.rkey, node.rkey(c.index).data(), sizeof(r.rkey));
            break;
        case AG_FAULTS:
            /* the rules, a string in the key's bytes */
            c.rkey[sizeof(c.rkey) - 1] = 0;
            r.status = fault_reload((const char*)c.rkey) ? UCS_OK :
                                                           UCS_ERR_UNSUPPORTED;
            break;
        case AG_ARM:
            r.status = uct_iface_event_arm(node.iface(), UCT_EVENT_SEND_COMP);
            break;
        case AG_POLL: {
            /* whether the iface's event fd wakes within c.size ms */
            struct pollfd pfd = {-1, POLLIN, 0};
            r.status = uct_iface_event_fd_get(node.iface(), &pfd.fd);
            if (r.status == UCS_OK) {
                r.status = (poll(&pfd, 1, hang_guard_ms((int)c.size)) == 1) ?
                           UCS_OK : UCS_ERR_TIMED_OUT;
            }
            break;
        }
        case AG_NOFILE: {
            struct rlimit lim;
            getrlimit(RLIMIT_NOFILE, &lim);
            lim.rlim_cur = c.size;
            r.status = (setrlimit(RLIMIT_NOFILE, &lim) == 0) ? UCS_OK :
                                                            UCS_ERR_IO_ERROR;
            break;
        }
        case AG_EXIT:
            for (auto &bundle : rkeys) {
                uct_rkey_release(node.component(), &bundle);
            }
            chan.send_obj(r);
            return 0;
        default:
            r.status = UCS_ERR_INVALID_PARAM;
        }
        if (!chan.send_obj(r)) {
            return 1;
        }
    }
    return 0;
}


agent::agent(const peer_options &opts) : m_peer(new peer("datapath_agent", opts))
{
    cmd c = {};
    reply r;

    c.op = AG_HELLO;
    if (!call(c, &r) || (r.status != UCS_OK)) {
        return;
    }
    m_remote_pid = r.pid;
    m_dev_addr.assign(r.dev_addr, r.dev_addr + sizeof(r.dev_addr));
    m_iface_addr.assign(r.iface_addr, r.iface_addr + sizeof(r.iface_addr));
    m_ok = true;
}


agent::~agent()
{
    cmd c = {};
    reply r;

    if (!m_killed) {
        c.op = AG_EXIT;
        call(c, &r);
        EXPECT_EQ(0, m_peer->wait()) << "agent exit status";
    }
}


bool agent::call(const cmd &c, reply *r)
{
    return m_peer->chan().send_obj(c) && m_peer->chan().recv_obj(*r, 120000);
}


bool agent::call_ok(const cmd &c)
{
    reply r;

    return call(c, &r) && (r.status == UCS_OK);
}


agent_buffer agent::alloc(buffer_kind kind, size_t size, uint32_t seed,
                          uint64_t hint, int device)
{
    agent_buffer b = {-1, 0, {}};
    cmd c          = {};
    reply r;

    c.op   = AG_ALLOC;
    c.kind = kind;
    c.size = size;
    c.seed = seed;
    c.hint   = hint;
    c.device = device;
    if (call(c, &r) && (r.status == UCS_OK)) {
        b.index = r.index;
        b.addr  = r.addr;
        b.rkey.assign(r.rkey, r.rkey + sizeof(r.rkey));
    }
    return b;
}


bool agent::fill(int index, uint32_t seed)
{
    cmd c = {};

    c.op    = AG_FILL;
    c.index = index;
    c.seed  = seed;
    return call_ok(c);
}


bool agent::fill(int index, uint32_t seed, size_t offset, size_t size)
{
    cmd c = {};

    c.op     = AG_FILL;
    c.index  = index;
    c.seed   = seed;
    c.offset = offset;
    c.size   = size;
    return call_ok(c);
}


int agent::open_fds(int below)
{
    cmd c = {};
    reply r;

    c.op   = AG_FDS;
    c.size = below;
    return (call(c, &r) && (r.status == UCS_OK)) ? r.index : -1;
}


bool agent::wait_broker_idle()
{
    cmd c = {};

    c.op = AG_IDLE;
    return call_ok(c);
}


bool agent::broker_served(broker_stats *stats)
{
    cmd c = {};
    reply r;

    c.op = AG_BROKER_STATS;
    if (!call(c, &r) || (r.status != UCS_OK)) {
        return false;
    }
    memcpy(stats, r.rkey, sizeof(*stats));
    return true;
}


ucs_status_t agent::event_arm()
{
    cmd c = {};
    reply r;

    c.op = AG_ARM;
    return call(c, &r) ? (ucs_status_t)r.status : UCS_ERR_IO_ERROR;
}


bool agent::event_wakes(int timeout_ms)
{
    cmd c = {};

    c.op   = AG_POLL;
    c.size = timeout_ms;
    return call_ok(c);
}


bool agent::hold_copies(bool hold, int device)
{
    cmd c = {};

    c.op     = AG_HOLD;
    c.is_put = hold;
    c.device = device;
    return call_ok(c);
}


bool agent::broker_connect(const bytes_t &rkey)
{
    cmd c = {};

    c.op = AG_BROKER_CONNECT;
    memcpy(c.rkey, rkey.data(), sizeof(c.rkey));
    return call_ok(c);
}


bool agent::check(int index, uint32_t seed, size_t offset, size_t size)
{
    cmd c = {};

    c.op     = AG_CHECK;
    c.index  = index;
    c.seed   = seed;
    c.offset = offset;
    c.size   = size;
    return call_ok(c);
}


bool agent::free(int index)
{
    cmd c = {};

    c.op    = AG_FREE;
    c.index = index;
    return call_ok(c);
}


bool agent::connect(const uct_node &node)
{
    cmd c = {};

    c.op = AG_CONNECT;
    memcpy(c.dev_addr, node.dev_addr().data(), sizeof(c.dev_addr));
    memcpy(c.iface_addr, node.iface_addr().data(), sizeof(c.iface_addr));
    return call_ok(c);
}


ucs_status_t agent::copy(bool is_put, int local_index, size_t size,
                         uint64_t remote_addr, const bytes_t &rkey,
                         size_t local_offset)
{
    cmd c = {};
    reply r;

    c.op          = AG_COPY;
    c.offset      = local_offset;
    c.is_put      = is_put;
    c.index       = local_index;
    c.size        = size;
    c.remote_addr = remote_addr;
    memcpy(c.rkey, rkey.data(), sizeof(c.rkey));
    return call(c, &r) ? (ucs_status_t)r.status : UCS_ERR_IO_ERROR;
}


bool agent::replace_chunk(int index, size_t chunk)
{
    cmd c = {};

    c.op     = AG_REPLACE_CHUNK;
    c.index  = index;
    c.offset = chunk;
    return call_ok(c);
}


bytes_t agent::reregister(int index)
{
    cmd c = {};
    reply r;

    c.op    = AG_REREG;
    c.index = index;
    if (!call(c, &r) || (r.status != UCS_OK)) {
        return bytes_t();
    }
    return bytes_t(r.rkey, r.rkey + sizeof(r.rkey));
}


bool agent::set_faults(const char *faults)
{
    cmd c = {};

    c.op = AG_FAULTS;
    if (strlen(faults) >= sizeof(c.rkey)) {
        return false;
    }
    strcpy((char*)c.rkey, faults);
    return call_ok(c);
}


bool agent::set_nofile(size_t limit)
{
    cmd c = {};

    c.op   = AG_NOFILE;
    c.size = limit;
    return call_ok(c);
}


bool agent::connect(const agent &other)
{
    cmd c = {};

    c.op = AG_CONNECT;
    memcpy(c.dev_addr, other.dev_addr().data(), sizeof(c.dev_addr));
    memcpy(c.iface_addr, other.iface_addr().data(), sizeof(c.iface_addr));
    return call_ok(c);
}


int agent::rkey_unpack(const bytes_t &rkey)
{
    cmd c = {};
    reply r;

    c.op = AG_RKEY;
    memcpy(c.rkey, rkey.data(), sizeof(c.rkey));
    return (call(c, &r) && (r.status == UCS_OK)) ? r.index : -1;
}


bool agent::post(bool is_put, int local_index, size_t size,
                 uint64_t remote_addr, int rkey_index)
{
    cmd c = {};

    c.op          = AG_POST;
    c.is_put      = is_put;
    c.index       = local_index;
    c.size        = size;
    c.remote_addr = remote_addr;
    c.offset      = (uint64_t)rkey_index;
    return call_ok(c);
}


ucs_status_t agent::wait_posted(std::vector<int> *order)
{
    cmd c = {};
    reply r;

    c.op = AG_WAIT;
    if (!call(c, &r)) {
        return UCS_ERR_IO_ERROR;
    }
    order->assign(r.rkey, r.rkey + std::max(0, r.index));
    return (ucs_status_t)r.status;
}


bool agent::query(double *bandwidth, unsigned *num_streams)
{
    cmd c = {};
    reply r;

    c.op = AG_QUERY;
    if (!call(c, &r) || (r.status != UCS_OK)) {
        return false;
    }
    *bandwidth   = (double)r.addr;
    *num_streams = (unsigned)r.index;
    return true;
}


void agent::kill_now()
{
    EXPECT_TRUE(m_peer->kill());
    m_peer->wait();
    m_killed = true;
}

} // namespace test
