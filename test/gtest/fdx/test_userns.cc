/*
 * cuda_ipc_ns: peers of another user namespace (docs/security.md, "User-
 * namespaced pods"): a peer whose uid our user namespace does not map shows
 * as the overflow uid. The default refuses it on both sides (the broker and
 * the importer's owner check) with a log line naming
 * UCX_CUDA_IPC_NS_USERNS_PEERS; that setting trusts it, and only it: a real
 * uid 65534 of the initial namespace stays refused.
 *
 * Real namespaces: a peer in a user namespace that maps only its own uid
 * (root's, as a pod's maps only its range), the other peer a process of
 * another uid outside it. Abstract sockets, one network namespace.
 */
#include "fdx/fdx_peers.h"

extern "C" {
#include "cuda_ipc_ns_userns.h"
}

#include <gtest/gtest.h>

#include <ucs/config/global_opts.h>
#include <ucs/debug/log.h>

#include <atomic>
#include <stdio.h>
#include <string.h>
#include <unistd.h>


namespace {

using namespace fdx_peers;

const uid_t OTHER_UID = 65533; /* a host uid no peer's namespace maps */

struct userns_owner_req {
    int userns_peers;
    int allowed_uid;
};

struct userns_owner_reply {
    int                         status;
    uct_cuda_ipc_ns_rkey_info_t desc;
};

struct userns_import_req {
    uct_cuda_ipc_ns_rkey_info_t desc;
    int                         userns_peers;
    int                         allowed_uid;
};

struct userns_import_result {
    int status;
    int bytes_ok;
    int hint_lines; /* its log lines naming the setting */
};


/* Counts the log lines naming the setting while installed */
class hint_counter {
public:
    hint_counter() { s_count = 0; ucs_log_push_handler(handler); }
    ~hint_counter() { ucs_log_pop_handler(); }
    static std::atomic<int> s_count;

private:
    static ucs_log_func_rc_t
    handler(const char *file, unsigned line, const char *function,
            ucs_log_level_t level, const ucs_log_component_config_t *comp,
            const char *format, va_list ap)
    {
        char msg[2048];
        va_list aq;

        va_copy(aq, ap);
        vsnprintf(msg, sizeof(msg), format, aq);
        va_end(aq);
        if (strstr(msg, "UCX_CUDA_IPC_NS_USERNS_PEERS=y") &&
            strstr(msg, "docs/security.md")) {
            ++s_count;
        }
        return UCS_LOG_FUNC_RC_CONTINUE;
    }
};

std::atomic<int> hint_counter::s_count;


/* Owner: a broker with the requested settings, one memfd registered; at
 * the end, how many refusals named the setting */
TEST_PEER_ROLE(userns_owner)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_BROKER);
    userns_owner_reply reply = {};
    uct_cuda_ipc_ns_broker_registry_reg_t *reg;
    uct_cuda_ipc_ns_broker_t *broker;
    userns_owner_req req;
    int fd, dummy;

    if (!chan.recv_obj(req)) {
        return 1;
    }
    cfg.userns_peers = req.userns_peers;
    cfg.allowed_uid  = req.allowed_uid;
    /* the broker logs its first refusal of a peer at diag level; set before
     * its thread starts, which reads it */
    ucs_global_opts.log_component.log_level = UCS_LOG_LEVEL_DIAG;
    hint_counter hints;

    reply.status = uct_cuda_ipc_ns_broker_get(&cfg, &broker);
    if (reply.status != UCS_OK) {
        chan.send_obj(reply);
        return 2;
    }
    fd = make_memfd(0x5a, MEM_SIZE);
    reply.status = (fd < 0) ? UCS_ERR_IO_ERROR :
                   uct_cuda_ipc_ns_broker_register(broker, fd, 0x4949,
                                                   reply.desc.token, &reg);
    if (reply.status == UCS_OK) {
        const uct_cuda_ipc_ns_nsid_identity_t *self = uct_cuda_ipc_ns_nsid_self();
        const char *addr = uct_cuda_ipc_ns_broker_addr(
                broker, &reply.desc.broker_addr_len);
        reply.desc.pid                   = self->pid;
        reply.desc.pid_ns                = self->pid_ns;
        reply.desc.start_time            = self->start_time;
        reply.desc.handle_type           = UCT_CUDA_IPC_NS_HANDLE_POSIX_FD;
        reply.desc.handle.posix.fd       = fd;
        reply.desc.handle.posix.alloc_id = 0x4949;
        memcpy(reply.desc.broker_addr, addr, reply.desc.broker_addr_len);
    }
    chan.send_obj(reply);
    chan.recv_obj(dummy, 60000); /* the import is over */
    if (reply.status == UCS_OK) {
        uct_cuda_ipc_ns_broker_unregister(broker, reg);
    }
    uct_cuda_ipc_ns_broker_put(broker); /* joins the broker's thread */
    chan.send_obj(hint_counter::s_count.load());
    return 0;
}


/* Importer: one import through the owner's broker */
TEST_PEER_ROLE(userns_importer)
{
    uct_cuda_ipc_ns_broker_proto_fdx_config_t cfg = fdx_config(UCT_CUDA_IPC_NS_FDX_BROKER);
    userns_import_result res = {};
    userns_import_req req;
    int fd = -1;

    if (!chan.recv_obj(req)) {
        return 1;
    }
    cfg.userns_peers = req.userns_peers;
    cfg.allowed_uid  = req.allowed_uid;
    {
        hint_counter hints;
        res.status     = uct_cuda_ipc_ns_fdx_import(&cfg, &req.desc, &fd, NULL);
        res.hint_lines = hint_counter::s_count.load();
    }
    if (res.status == UCS_OK) {
        res.bytes_ok = check_bytes(fd, 0x5a, MEM_SIZE);
        close(fd);
    }
    chan.send_obj(res);
    return 0;
}


struct userns_outcome {
    userns_import_result import;
    int                  owner_hint_lines;
};


/* An owner peer with @a owner_opts serving one import by an importer peer
 * with @a importer_opts, each with its USERNS_PEERS and allowed uid */
userns_outcome run_pair(const test::peer_options &owner_opts,
                        int owner_userns_peers, int owner_allowed_uid,
                        const test::peer_options &importer_opts,
                        int importer_userns_peers, int importer_allowed_uid)
{
    userns_outcome out = {};
    test::peer owner("userns_owner", owner_opts);
    userns_owner_req oreq = {owner_userns_peers, owner_allowed_uid};
    userns_owner_reply oreply;
    int done = 1;

    EXPECT_TRUE(owner.chan().send_obj(oreq));
    EXPECT_TRUE(owner.chan().recv_obj(oreply));
    EXPECT_EQ(UCS_OK, oreply.status);
    if (oreply.status == UCS_OK) {
        test::peer importer("userns_importer", importer_opts);
        userns_import_req ireq = {};
        ireq.desc              = oreply.desc;
        ireq.userns_peers      = importer_userns_peers;
        ireq.allowed_uid       = importer_allowed_uid;
        EXPECT_TRUE(importer.chan().send_obj(ireq));
        EXPECT_TRUE(importer.chan().recv_obj(out.import, 60000));
        EXPECT_EQ(0, importer.wait());
    }
    EXPECT_TRUE(owner.chan().send_obj(done));
    EXPECT_TRUE(owner.chan().recv_obj(out.owner_hint_lines, 60000));
    EXPECT_EQ(0, owner.wait());
    return out;
}


test::peer_options in_own_userns()
{
    test::peer_options opts;
    opts.new_user_ns = true;
    opts.map_own_uid = true;
    return opts;
}


/* read here, not through the module, which the tests check */
bool in_initial_userns()
{
    unsigned long first, lower, count;
    FILE *f = fopen("/proc/self/uid_map", "r");
    bool initial;

    if (f == nullptr) {
        return false;
    }
    initial = (fscanf(f, "%lu %lu %lu", &first, &lower, &count) == 3) &&
              (first == 0) && (lower == 0) && (count == 4294967295UL) &&
              (fscanf(f, "%lu", &first) != 1);
    fclose(f);
    return initial;
}


test::peer_options as_other_uid(uid_t uid = OTHER_UID)
{
    test::peer_options opts;
    opts.uid = (int)uid;
    return opts;
}

} // namespace


class userns_peers : public ::testing::Test {
protected:
    void SetUp() override
    {
        if (geteuid() != 0) {
            GTEST_SKIP() << "needs root (a peer of another uid)";
        }
        if (!in_initial_userns()) {
            GTEST_SKIP() << "runs in the initial user namespace only";
        }
    }
};


/* The broker of a user-namespaced pod: a peer its namespace does not map
 * (SO_PEERCRED: the overflow uid) is refused by default, the log line names
 * the setting; with it, served */
TEST_F(userns_peers, broker_refuses_unmapped_peer_by_default)
{
    /* the importer, uid OTHER_UID of the host, trusts the owner's uid 0 */
    userns_outcome out = run_pair(in_own_userns(), 0, -1, as_other_uid(), 0, 0);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, out.import.status);
    EXPECT_GE(out.owner_hint_lines, 1) << "the refusal names the setting";

    out = run_pair(in_own_userns(), 1, -1, as_other_uid(), 0, 0);
    EXPECT_EQ(UCS_OK, out.import.status);
    EXPECT_TRUE(out.import.bytes_ok);
    EXPECT_EQ(0, out.owner_hint_lines);
}


/* The importer in a user-namespaced pod: a broker of a uid its namespace
 * does not map is not believed by default, the log line names the setting;
 * with it, believed (the broker's other checks still apply) */
TEST_F(userns_peers, importer_refuses_unmapped_broker_by_default)
{
    /* the owner, uid OTHER_UID of the host, serves the importer's uid 0 */
    userns_outcome out = run_pair(as_other_uid(), 0, 0, in_own_userns(), 0, -1);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, out.import.status);
    EXPECT_GE(out.import.hint_lines, 1) << "the refusal names the setting";

    out = run_pair(as_other_uid(), 0, 0, in_own_userns(), 1, -1);
    EXPECT_EQ(UCS_OK, out.import.status);
    EXPECT_TRUE(out.import.bytes_ok);
    EXPECT_EQ(0, out.import.hint_lines);
}


/* Outside a user namespace every uid is mapped: uid 65534 (nobody) is a
 * uid like any other, and the setting trusts it on neither side */
TEST_F(userns_peers, setting_trusts_no_mapped_uid)
{
    EXPECT_FALSE(uct_cuda_ipc_ns_userns_unmapped(65534));
    EXPECT_FALSE(uct_cuda_ipc_ns_userns_trusted(65534, 1));

    userns_outcome out = run_pair(test::peer_options(), 1, -1,
                                  as_other_uid(65534), 1, 0);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, out.import.status);
    EXPECT_EQ(0, out.owner_hint_lines) << "nobody is not an unmapped peer";

    out = run_pair(as_other_uid(65534), 1, 0, test::peer_options(), 1, -1);
    EXPECT_EQ(UCT_CUDA_IPC_NS_ERR_NO_PERMISSION, out.import.status);
    EXPECT_EQ(0, out.import.hint_lines);
}
