/*
 * Bytes checked between two pods: UCP put, get and tagged send of CUDA
 * memory, each side in its own container (contrib/pods-runc.sh).
 *
 *   ucp_pods_check -l PORT [-s SIZES]        the server (target)
 *   ucp_pods_check HOST PORT [-s SIZES]      the client (initiator)
 *
 * The two exchange their worker addresses and rkeys over a TCP connection
 * (PORT). For each size N (comma separated, default 8,65536,4194317),
 * memory from ucp_mem_map(UCP_MEM_MAP_ALLOCATE, UCS_MEMORY_TYPE_CUDA), that
 * is from the module's allocator (UCX_CUDA_CPY_NS_MEM_ALLOC):
 *  - put: the client puts N - 13 bytes of pattern 1 at offset 13 (N bytes
 *    at 0 when N <= 64) of the server's zeroed buffer R; the server finds
 *    pattern 1 there and zeros before it;
 *  - get: the client gets the server's buffer G (pattern 2) into a zeroed
 *    buffer and finds pattern 2;
 *  - tag: the server sends G, the client receives it into its buffer of
 *    pattern 1 and finds pattern 2.
 * Device memory is filled and read with the driver UCX_CUDA_IPC_NS_DRIVER
 * names (cuMemcpyHtoD on the default stream and its cuStreamSynchronize,
 * cuMemcpyDtoH). Prints one line per size and side; exit 0
 * when every byte is as expected, 1 otherwise.
 */
#define _GNU_SOURCE
#include <ucp/api/ucp.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define PUT_OFFSET 13 /* where the put lands in the target, if size > 64 */
#define TAG        0x5eedULL
#define MAX_SIZES  8

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

static struct {
    CUresult (*init)(unsigned);
    CUresult (*device_get)(int *, int);
    CUresult (*primary_ctx_retain)(void **, int);
    CUresult (*ctx_set_current)(void *);
    CUresult (*htod)(CUdeviceptr, const void *, size_t);
    CUresult (*dtoh)(void *, CUdeviceptr, size_t);
    CUresult (*stream_synchronize)(void *);
} cu;

static const char *side = "client";

static void fail(const char *fmt, ...)
{
    va_list ap;

    fprintf(stderr, "ucp_pods_check: %s: ", side);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void *sym(void *lib, const char *name)
{
    void *p = dlsym(lib, name);

    if (p == NULL) {
        fail("driver lacks %s", name);
    }
    return p;
}

static void cu_load(void)
{
    const char *path = getenv("UCX_CUDA_IPC_NS_DRIVER");
    void *lib, *ctx;
    int dev;

    lib = dlopen(path ? path : "libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (lib == NULL) {
        fail("dlopen: %s", dlerror());
    }
    cu.init               = sym(lib, "cuInit");
    cu.device_get         = sym(lib, "cuDeviceGet");
    cu.primary_ctx_retain = sym(lib, "cuDevicePrimaryCtxRetain");
    cu.ctx_set_current    = sym(lib, "cuCtxSetCurrent");
    cu.htod               = sym(lib, "cuMemcpyHtoD_v2");
    cu.dtoh               = sym(lib, "cuMemcpyDtoH_v2");
    cu.stream_synchronize = sym(lib, "cuStreamSynchronize");
    if ((cu.init(0) != 0) || (cu.device_get(&dev, 0) != 0) ||
        (cu.primary_ctx_retain(&ctx, dev) != 0) ||
        (cu.ctx_set_current(ctx) != 0)) {
        fail("no CUDA device 0");
    }
}

static size_t put_offset(size_t size)
{
    return (size > 64) ? PUT_OFFSET : 0;
}

static uint8_t pattern(size_t i, int seed)
{
    return (uint8_t)(i * 131 + (i >> 12) * 7 + seed * 29 + 1);
}

/* ---- the TCP connection: whole messages of a known length ------------- */
static void xfer(int fd, void *buf, size_t len, int out)
{
    char *p = buf;
    ssize_t n;

    while (len > 0) {
        n = out ? send(fd, p, len, MSG_NOSIGNAL) : recv(fd, p, len, 0);
        if (n <= 0) {
            fail("control connection: %s", n == 0 ? "closed" : "error");
        }
        p += n;
        len -= (size_t)n;
    }
}

static void send_blob(int fd, const void *buf, uint64_t len)
{
    xfer(fd, &len, sizeof(len), 1);
    xfer(fd, (void*)buf, len, 1);
}

static void *recv_blob(int fd, uint64_t *len_p)
{
    uint64_t len;
    void *buf;

    xfer(fd, &len, sizeof(len), 0);
    if ((len == 0) || (len > (1 << 20)) || ((buf = malloc(len)) == NULL)) {
        fail("bad message length %llu", (unsigned long long)len);
    }
    xfer(fd, buf, len, 0);
    if (len_p != NULL) {
        *len_p = len;
    }
    return buf;
}

static int tcp_connect(const char *host, const char *port, int listen_only)
{
    struct addrinfo hints = {0}, *ai;
    int fd, lfd, one = 1, i;

    hints.ai_family   = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags    = listen_only ? AI_PASSIVE : 0;
    if (getaddrinfo(host, port, &hints, &ai) != 0) {
        fail("bad address %s:%s", host ? host : "*", port);
    }
    if (listen_only) {
        lfd = socket(AF_INET, SOCK_STREAM, 0);
        setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if ((bind(lfd, ai->ai_addr, ai->ai_addrlen) != 0) ||
            (listen(lfd, 1) != 0)) {
            fail("cannot listen on port %s", port);
        }
        fd = accept(lfd, NULL, NULL);
        close(lfd);
    } else {
        for (i = 0; i < 100; ++i) { /* the server may not listen yet */
            fd = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
                break;
            }
            close(fd);
            fd = -1;
            usleep(100000);
        }
    }
    freeaddrinfo(ai);
    if (fd < 0) {
        fail("no connection to %s:%s", host ? host : "*", port);
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* ---- UCP ------------------------------------------------------------- */
static ucp_context_h context;
static ucp_worker_h worker;

/* progress until the request completes (or until a byte arrives on fd) */
static void wait_req(void *req, const char *what)
{
    ucs_status_t status;

    if (UCS_PTR_IS_ERR(req)) {
        fail("%s: %s", what, ucs_status_string(UCS_PTR_STATUS(req)));
    }
    if (req == NULL) {
        return;
    }
    do {
        ucp_worker_progress(worker);
        status = ucp_request_check_status(req);
    } while (status == UCS_INPROGRESS);
    ucp_request_free(req);
    if (status != UCS_OK) {
        fail("%s: %s", what, ucs_status_string(status));
    }
}

/* wait for one byte on the control connection, progressing UCP */
static void wait_msg(int fd, char expect)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    char c;

    while (poll(&pfd, 1, 0) == 0) {
        ucp_worker_progress(worker);
    }
    xfer(fd, &c, 1, 0);
    if (c != expect) {
        fail("peer says '%c' (expected '%c')", c, expect);
    }
}

static void close_ep(ucp_ep_h ep)
{
    ucp_request_param_t param = {0};
    ucs_status_t status    = UCS_OK;
    void *req              = ucp_ep_close_nbx(ep, &param);

    if (UCS_PTR_IS_ERR(req)) {
        status = UCS_PTR_STATUS(req);
    } else if (req != NULL) {
        do {
            ucp_worker_progress(worker);
            status = ucp_request_check_status(req);
        } while (status == UCS_INPROGRESS);
        ucp_request_free(req);
    }
    if (status != UCS_OK) {
        printf("ucp_pods_check: %s: ep close after the checks: %s\n", side,
               ucs_status_string(status));
    }
}

static void say(int fd, char c)
{
    xfer(fd, &c, 1, 1);
}

struct buf {
    ucp_mem_h   memh;
    CUdeviceptr ptr;
    size_t      size;
};

static void buf_alloc(struct buf *b, size_t size, int seed)
{
    ucp_mem_map_params_t params = {0};
    ucp_mem_attr_t attr = {0};
    uint8_t *host = malloc(size);
    size_t i;

    params.field_mask  = UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                         UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                         UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE;
    params.length      = size;
    params.flags       = UCP_MEM_MAP_ALLOCATE;
    params.memory_type = UCS_MEMORY_TYPE_CUDA;
    if (ucp_mem_map(context, &params, &b->memh) != UCS_OK) {
        fail("ucp_mem_map of %zu bytes of CUDA memory failed", size);
    }
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_MEM_TYPE;
    if ((ucp_mem_query(b->memh, &attr) != UCS_OK) ||
        (attr.mem_type != UCS_MEMORY_TYPE_CUDA)) {
        fail("ucp_mem_map gave no CUDA memory");
    }
    b->ptr  = (CUdeviceptr)(uintptr_t)attr.address;
    b->size = size;
    for (i = 0; i < size; ++i) {
        host[i] = (seed == 0) ? 0 : pattern(i, seed);
    }
    /* a pageable cuMemcpyHtoD may return before the copy lands (as the
     * emulator's does): the bytes must be there before a peer reads them
     * or a transfer writes them */
    if ((cu.htod(b->ptr, host, size) != 0) ||
        (cu.stream_synchronize(NULL) != 0)) {
        fail("cuMemcpyHtoD failed");
    }
    free(host);
}

/* the bytes [from, size) of b hold pattern seed from pattern index 0
 * (seed 0: zeros), and [0, from) zeros */
static void buf_check(const struct buf *b, size_t from, int seed,
                      const char *what)
{
    uint8_t *host = malloc(b->size), want;
    size_t i;

    if (cu.dtoh(host, b->ptr, b->size) != 0) {
        fail("cuMemcpyDtoH failed");
    }
    for (i = 0; i < b->size; ++i) {
        want = ((i < from) || (seed == 0)) ? 0 : pattern(i - from, seed);
        if (host[i] != want) {
            fail("%s of %zu bytes: byte %zu is 0x%02x, expected 0x%02x",
                 what, b->size, i, host[i], want);
        }
    }
    free(host);
}

static void buf_free(struct buf *b)
{
    ucp_mem_unmap(context, b->memh);
}

static void send_rkey(int fd, const struct buf *b)
{
    void *rkey;
    size_t len;
    uint64_t addr = b->ptr;

    if (ucp_rkey_pack(context, b->memh, &rkey, &len) != UCS_OK) {
        fail("ucp_rkey_pack failed");
    }
    xfer(fd, &addr, sizeof(addr), 1);
    send_blob(fd, rkey, len);
    ucp_rkey_buffer_release(rkey);
}

static ucp_rkey_h recv_rkey(int fd, ucp_ep_h ep, uint64_t *addr)
{
    ucp_rkey_h rkey;
    void *buf;

    xfer(fd, addr, sizeof(*addr), 0);
    buf = recv_blob(fd, NULL);
    if (ucp_ep_rkey_unpack(ep, buf, &rkey) != UCS_OK) {
        fail("ucp_ep_rkey_unpack failed");
    }
    free(buf);
    return rkey;
}

static void server_size(int fd, ucp_ep_h ep, size_t size)
{
    ucp_request_param_t param = {0};
    struct buf r, g;

    buf_alloc(&r, size, 0);
    buf_alloc(&g, size, 2);
    send_rkey(fd, &r);
    send_rkey(fd, &g);
    wait_msg(fd, 'p'); /* the client put and flushed */
    buf_check(&r, put_offset(size), 1, "put");
    say(fd, 'P');
    wait_msg(fd, 'g'); /* the client got G; now the tagged message */
    wait_req(ucp_tag_send_nbx(ep, (void*)(uintptr_t)g.ptr, size, TAG, &param),
             "tag send");
    wait_msg(fd, 't');
    printf("ucp_pods_check: server: %zu bytes: put into our memory at offset "
           "%zu ok, tag send ok\n", size, put_offset(size));
    buf_free(&r);
    buf_free(&g);
}

static void client_size(int fd, ucp_ep_h ep, size_t size)
{
    ucp_request_param_t param = {0};
    ucp_rkey_h rkey_r, rkey_g;
    uint64_t addr_r, addr_g;
    struct buf p, q;

    buf_alloc(&p, size, 1);
    buf_alloc(&q, size, 0);
    rkey_r = recv_rkey(fd, ep, &addr_r);
    rkey_g = recv_rkey(fd, ep, &addr_g);
    wait_req(ucp_put_nbx(ep, (void*)(uintptr_t)p.ptr, size - put_offset(size),
                         addr_r + put_offset(size), rkey_r, &param), "put");
    wait_req(ucp_ep_flush_nbx(ep, &param), "flush after put");
    say(fd, 'p');
    wait_msg(fd, 'P');
    wait_req(ucp_get_nbx(ep, (void*)(uintptr_t)q.ptr, size, addr_g, rkey_g,
                         &param), "get");
    wait_req(ucp_ep_flush_nbx(ep, &param), "flush after get");
    buf_check(&q, 0, 2, "get");
    say(fd, 'g');
    wait_req(ucp_tag_recv_nbx(worker, (void*)(uintptr_t)p.ptr, size, TAG,
                              (ucp_tag_t)-1, &param), "tag recv");
    buf_check(&p, 0, 2, "tag");
    say(fd, 't');
    printf("ucp_pods_check: client: %zu bytes: put at offset %zu ok, get ok, "
           "tag recv ok\n", size, put_offset(size));
    ucp_rkey_destroy(rkey_r);
    ucp_rkey_destroy(rkey_g);
    buf_free(&p);
    buf_free(&q);
}

int main(int argc, char **argv)
{
    const char *sizes = "8,65536,4194317", *host = NULL, *port = NULL;
    ucp_params_t params = {0};
    ucp_worker_params_t wparams = {0};
    ucp_ep_params_t eparams = {0};
    ucp_address_t *addr;
    size_t addr_len;
    void *peer_addr;
    ucp_ep_h ep;
    char *list, *tok, *save;
    int opt, fd, server = 0;

    while ((opt = getopt(argc, argv, "l:s:")) != -1) {
        switch (opt) {
        case 'l': server = 1; port = optarg; break;
        case 's': sizes = optarg; break;
        default: fail("usage: %s -l PORT | HOST PORT [-s SIZES]", argv[0]);
        }
    }
    if (!server) {
        if (optind + 2 != argc) {
            fail("usage: %s -l PORT | HOST PORT [-s SIZES]", argv[0]);
        }
        host = argv[optind];
        port = argv[optind + 1];
    } else {
        side = "server";
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    cu_load();

    params.field_mask = UCP_PARAM_FIELD_FEATURES;
    params.features   = UCP_FEATURE_TAG | UCP_FEATURE_RMA;
    if ((ucp_init(&params, NULL, &context) != UCS_OK) ||
        (ucp_worker_create(context, &wparams, &worker) != UCS_OK) ||
        (ucp_worker_get_address(worker, &addr, &addr_len) != UCS_OK)) {
        fail("UCP initialization failed");
    }
    fd = tcp_connect(host, port, server);
    send_blob(fd, addr, addr_len);
    peer_addr = recv_blob(fd, NULL);
    ucp_worker_release_address(worker, addr);
    eparams.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS;
    eparams.address    = peer_addr;
    if (ucp_ep_create(worker, &eparams, &ep) != UCS_OK) {
        fail("ucp_ep_create failed");
    }

    list = strdup(sizes);
    for (tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        size_t size = strtoull(tok, NULL, 0);

        if (size == 0) {
            fail("bad size '%s'", tok);
        }
        if (server) {
            server_size(fd, ep, size);
        } else {
            client_size(fd, ep, size);
        }
    }
    free(list);

    /* both done before either closes its endpoint, and both closed
     * (progressing, so the peer's close completes too) before either
     * exits; a close that fails after the checks is reported, not fatal */
    say(fd, 'x');
    wait_msg(fd, 'x');
    close_ep(ep);
    say(fd, 'y');
    wait_msg(fd, 'y');
    free(peer_addr);
    close(fd);
    ucp_worker_destroy(worker);
    ucp_cleanup(context);
    printf("ucp_pods_check: %s: all bytes as expected\n", side);
    return 0;
}
