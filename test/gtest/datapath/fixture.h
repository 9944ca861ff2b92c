/*
 * Data-path tests: shared fixtures — environment and socket directory
 * scopes, and a node connected to one exporting agent.
 */
#ifndef TEST_DATAPATH_FIXTURE_H
#define TEST_DATAPATH_FIXTURE_H

#include "agent.h"
#include "common/scoped_env.h"

#include <gtest/gtest.h>
#include <cstdlib>
#include <memory>
#include <string>
#include <sys/stat.h>
#include <unistd.h>


namespace test {

const size_t MiB = 1ul << 20;


/* A shared socket directory, as a volume mounted in two pods */
class sock_dir {
public:
    sock_dir()
    {
        char tmpl[] = "/tmp/cuda_ipc_ns_sock.XXXXXX";
        m_path = mkdtemp(tmpl);
        chmod(m_path.c_str(), 0700);
    }
    ~sock_dir() { rmdir(m_path.c_str()); }
    const std::string &path() const { return m_path; }
private:
    std::string m_path;
};


/* One exporting agent and a connected node, for the tests below */
class datapath_pair : public ::testing::Test {
public:
    void SetUp() override
    {
        if (!cuda_init()) {
            GTEST_SKIP() << "no CUDA driver or device";
        }
    }

    void start(const std::map<std::string, std::string> &md_config = {},
               const std::map<std::string, std::string> &iface_config = {},
               const peer_options &opts = peer_options())
    {
        m_node.reset(new uct_node(md_config, iface_config));
        ASSERT_TRUE(m_node->ok());
        m_agent.reset(new agent(opts));
        ASSERT_TRUE(m_agent->ok());
        m_ep = m_node->connect(m_agent->dev_addr(), m_agent->iface_addr());
        ASSERT_NE(nullptr, m_ep);
    }

    /* an agent buffer and its unpacked key */
    struct remote {
        agent_buffer      buf;
        uct_rkey_bundle_t rkey;
    };

    remote export_buffer(buffer_kind kind, size_t size, uint32_t seed,
                         uint64_t hint = 0)
    {
        remote r;
        r.buf = m_agent->alloc(kind, size, seed, hint);
        EXPECT_GE(r.buf.index, 0);
        if (r.buf.rkey.empty()) {
            r.rkey = {};
            return r; /* no key to unpack: the test fails, it must not crash */
        }
        EXPECT_EQ(UCS_OK, uct_rkey_unpack(m_node->component(),
                                          r.buf.rkey.data(), &r.rkey));
        m_rkeys.push_back(r.rkey);
        return r;
    }

    /* idempotent: tests call it early to check for leaks afterwards */
    void TearDown() override
    {
        for (auto &rkey : m_rkeys) {
            uct_rkey_release(m_node->component(), &rkey);
        }
        m_rkeys.clear();
        m_node.reset();
        m_agent.reset();
    }

    ucs_status_t post(bool is_put, void *local, size_t size, uint64_t addr,
                      uct_rkey_t rkey, completion *comp, uct_ep_h ep = nullptr)
    {
        uct_iov_t iov = {local, size, nullptr, 0, 1};
        ep            = (ep != nullptr) ? ep : m_ep;
        return is_put ? uct_ep_put_zcopy(ep, &iov, 1, addr, rkey, &comp->comp) :
                        uct_ep_get_zcopy(ep, &iov, 1, addr, rkey, &comp->comp);
    }

    std::unique_ptr<uct_node>      m_node;
    std::unique_ptr<agent>         m_agent;
    uct_ep_h                       m_ep = nullptr;
    std::vector<uct_rkey_bundle_t> m_rkeys;
};


} // namespace test

#endif
