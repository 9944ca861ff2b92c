/*
 * Test helpers: one UCP context, worker and endpoint, with blocking waits
 * that keep progressing (for tests of the module through UCP).
 */
#ifndef TEST_COMMON_UCP_SIDE_H
#define TEST_COMMON_UCP_SIDE_H

#include "common/peer.h"

extern "C" {
#include <ucp/api/ucp.h>
}

#include <poll.h>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <vector>


namespace test {

/* A safety net that turns a hung request into a failure, never a bound on
 * how long an operation may take: a loaded CI machine (emulated copies of
 * 64 MiB, two processes progressing) must not reach it. A process that gave
 * up on its side closes its TCP connection, and its peer then sees
 * UCS_ERR_ENDPOINT_TIMEOUT (UCX's tcp transport reports every connection
 * dropped by the peer that way), which looks like a transport failure. */
const int UCP_TIMEOUT_MS = 300000;


/* A UCP context and worker; UCX_TLS=tls and UCX_PROTO_ENABLE=proto when
 * given */
class ucp_side {
public:
    explicit ucp_side(const char *tls = nullptr, const char *proto = nullptr)
    {
        ucp_params_t params = {};
        ucp_worker_params_t worker_params = {};
        ucp_config_t *config;

        init_status = ucp_config_read(NULL, NULL, &config);
        if (init_status != UCS_OK) {
            return;
        }
        if (tls != nullptr) {
            ucp_config_modify(config, "TLS", tls);
        }
        if (proto != nullptr) {
            ucp_config_modify(config, "PROTO_ENABLE", proto);
        }
        params.field_mask = UCP_PARAM_FIELD_FEATURES;
        params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
        init_status       = ucp_init(&params, config, &context);
        ucp_config_release(config);
        if (init_status != UCS_OK) {
            return;
        }
        worker_status = ucp_worker_create(context, &worker_params, &worker);
    }

    ~ucp_side()
    {
        if (ep != nullptr) {
            close_ep();
        }
        if (worker != nullptr) {
            ucp_worker_destroy(worker);
        }
        if (context != nullptr) {
            ucp_cleanup(context);
        }
    }

    bool ok() const { return (init_status == UCS_OK) && (worker_status == UCS_OK); }

    std::vector<uint8_t> address() const
    {
        ucp_address_t *addr;
        size_t len;
        if (ucp_worker_get_address(worker, &addr, &len) != UCS_OK) {
            return std::vector<uint8_t>();
        }
        std::vector<uint8_t> bytes((uint8_t*)addr, (uint8_t*)addr + len);
        ucp_worker_release_address(worker, addr);
        return bytes;
    }

    ucs_status_t connect(const std::vector<uint8_t> &remote)
    {
        ucp_ep_params_t params = {};
        params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
        params.address    = (const ucp_address_t*)remote.data();
        return ucp_ep_create(worker, &params, &ep);
    }

    void close_ep()
    {
        ucp_request_param_t param = {};
        param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
        param.flags        = UCP_EP_CLOSE_FLAG_FORCE;
        wait(ucp_ep_close_nbx(ep, &param), nullptr);
        ep = nullptr;
    }

    /* memory type UCP detects for @a ptr (ucp_mem_map without a type) */
    ucs_memory_type_t detect(void *ptr, size_t length)
    {
        ucp_mem_map_params_t params = {};
        ucp_mem_attr_t attr;
        ucp_mem_h memh;

        params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        params.address    = ptr;
        params.length     = length;
        if (ucp_mem_map(context, &params, &memh) != UCS_OK) {
            return UCS_MEMORY_TYPE_LAST;
        }
        attr.field_mask = UCP_MEM_ATTR_FIELD_MEM_TYPE;
        ucp_mem_query(memh, &attr);
        ucp_mem_unmap(context, memh);
        return attr.mem_type;
    }

    /* register [ptr, ptr+length) and pack its key into @a rkey (at most
     * @a max bytes, *rkey_len its length); false on failure */
    bool map_and_pack(void *ptr, size_t length, ucp_mem_h *memh_p,
                      uint8_t *rkey, size_t max, uint32_t *rkey_len)
    {
        ucp_mem_map_params_t params = {};
        void *packed;
        size_t len;

        params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                            UCP_MEM_MAP_PARAM_FIELD_LENGTH;
        params.address    = ptr;
        params.length     = length;
        if (ucp_mem_map(context, &params, memh_p) != UCS_OK) {
            return false;
        }
        if (ucp_rkey_pack(context, *memh_p, &packed, &len) != UCS_OK) {
            return false;
        }
        bool fits = len <= max;
        if (fits) {
            memcpy(rkey, packed, len);
            *rkey_len = len;
        }
        ucp_rkey_buffer_release(packed);
        return fits;
    }

    /* progress until @a req completes (also the worker of @a other) */
    ucs_status_t wait(ucs_status_ptr_t req, ucp_side *other)
    {
        auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(hang_guard_ms(UCP_TIMEOUT_MS));
        ucs_status_t status;

        if (UCS_PTR_IS_ERR(req) || (req == nullptr)) {
            return UCS_PTR_STATUS(req);
        }
        do {
            ucp_worker_progress(worker);
            if (other != nullptr) {
                ucp_worker_progress(other->worker);
            }
            status = ucp_request_check_status(req);
        } while ((status == UCS_INPROGRESS) &&
                 (std::chrono::steady_clock::now() < deadline));
        if (status == UCS_INPROGRESS) {
            ucp_request_cancel(worker, req); /* the test fails anyway */
            ucp_request_free(req);
            return UCS_ERR_TIMED_OUT;
        }
        ucp_request_free(req);
        return status;
    }

    ucs_status_ptr_t send(const void *buf, size_t size, ucp_tag_t tag)
    {
        ucp_request_param_t param = {};
        return ucp_tag_send_nbx(ep, buf, size, tag, &param);
    }

    ucs_status_ptr_t recv(void *buf, size_t size, ucp_tag_t tag)
    {
        ucp_request_param_t param = {};
        return ucp_tag_recv_nbx(worker, buf, size, tag, (ucp_tag_t)-1, &param);
    }

    /* receive one message of @a len bytes on @a chan, progressing; waits
     * for the message or for the channel to close (the other process ended),
     * however long the other process takes */
    bool chan_recv(const test::channel &chan, void *buf, size_t len)
    {
        for (;;) {
            ucp_worker_progress(worker);
            struct pollfd pfd = {chan.fd(), POLLIN, 0};
            int n = poll(&pfd, 1, 1);
            if ((n < 0) && (errno != EINTR)) {
                return false;
            } else if (n > 0) {
                /* a message, or end of file / error: recv tells which */
                ssize_t ret = chan.recv(buf, len, 0);
                return (ret >= 0) && ((size_t)ret == len);
            }
        }
    }

    ucs_status_t  init_status   = UCS_ERR_LAST;
    ucs_status_t  worker_status = UCS_ERR_LAST;
    ucp_context_h context       = nullptr;
    ucp_worker_h  worker        = nullptr;
    ucp_ep_h      ep            = nullptr;
};


} // namespace test

#endif
