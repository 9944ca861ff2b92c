/*
 * cudasim tests: streams, events, host functions, copies and memset;
 * ordering under concurrency.
 */
#include "cudasim_test.h"
#include "common/hang_guard.h"

#include <atomic>
#include <functional>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>
#include <poll.h>
#include <unistd.h>

using namespace cudasim_test;


class test_cudasim_stream : public base {
protected:
    /* a host function that blocks its stream until released; the test
     * waits for it to be reached on a condition variable, never on time */
    struct gate {
        std::mutex              lock;
        std::condition_variable cond;
        bool                    open    = false;
        bool                    reached = false;

        void wait_reached()
        {
            std::unique_lock<std::mutex> guard(lock);
            cond.wait(guard, [this] { return reached; });
        }
        void set_open(bool value)
        {
            std::lock_guard<std::mutex> guard(lock);
            open = value;
            if (!value) {
                reached = false;
            }
            cond.notify_all();
        }
    };

    static void CUDA_CB gate_func(void *arg) {
        gate *g = (gate*)arg;
        std::unique_lock<std::mutex> guard(g->lock);
        g->reached = true;
        g->cond.notify_all();
        g->cond.wait(guard, [g] { return g->open; });
    }

    /* the emulator's copy-engine hold (test/cudasim/README.md), released
     * on every exit path */
    struct copy_hold {
        int (*hold)(int, int) = (int (*)(int, int))driver_sym(
                "cudasim_hold_copies");
        bool held = (hold != nullptr) && (hold(-1, 1) == 0);
        ~copy_hold() { release(); }
        void release()
        {
            if (held) {
                hold(-1, 0);
                held = false;
            }
        }
    };

    static bool wait_quiescent()
    {
        auto fn = (int (*)(void))driver_sym("cudasim_wait_quiescent");
        return (fn != nullptr) && (fn() == 0);
    }

    /* on the emulator, until @a stream ran what it can (false on a GPU) */
    static bool wait_stream_stalled(CUstream stream)
    {
        auto fn = (int (*)(CUstream))driver_sym("cudasim_wait_stream_stalled");
        return (fn != nullptr) && (fn(stream) == 0);
    }
};


TEST_F(test_cudasim_stream, create_destroy)
{
    CUstream s1, s2;

    CU_OK(cuStreamCreate, &s1, CU_STREAM_DEFAULT);
    CU_OK(cuStreamCreate, &s2, CU_STREAM_NON_BLOCKING);
    CU_OK(cuStreamQuery, s1);
    CU_OK(cuStreamSynchronize, s2);
    CU_OK(cuStreamSynchronize, nullptr);
    CU_OK(cuStreamQuery, nullptr);
    CU_OK(cuStreamDestroy, s1);
    CU_OK(cuStreamDestroy, s2);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamCreate, &s1, 0x80);
}


TEST_F(test_cudasim_stream, query_pending_and_event)
{
    const size_t size = 1 << 16;
    std::vector<unsigned char> back(size, 1);
    CUstream stream;
    CUevent event, never;
    CUdeviceptr src, dst;
    gate g;

    CU_OK(cuMemAlloc, &src, size);
    CU_OK(cuMemAlloc, &dst, size);
    CU_OK(cuMemsetD8, dst, 0, size);
    CU_OK(cuStreamSynchronize, nullptr);
    CU_OK(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    CU_OK(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);
    CU_OK(cuEventCreate, &never, CU_EVENT_DEFAULT);
    CU_OK(cuEventQuery, never); /* never recorded: complete */

    /* only device memory behind the gate: an asynchronous copy from or to
     * pageable host memory may block the caller on a GPU (here, forever) */
    CU_OK(cuLaunchHostFunc, stream, gate_func, &g);
    CU_OK(cuMemsetD8Async, src, 7, size, stream);
    CU_OK(cuMemcpyDtoDAsync, dst, src, size, stream);
    CU_OK(cuEventRecord, event, stream);

    g.wait_reached();
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery, stream);
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery, event);
    /* the non-blocking stream does not hold the default stream's copy */
    CU_OK(cuMemcpyDtoH, back.data(), dst, size);
    EXPECT_EQ(std::vector<unsigned char>(size, 0), back)
            << "the copies wait behind the host function";

    g.set_open(true);
    CU_OK(cuEventSynchronize, event);
    CU_OK(cuEventQuery, event);
    CU_OK(cuMemcpyDtoH, back.data(), dst, size);
    EXPECT_EQ(std::vector<unsigned char>(size, 7), back);
    CU_OK(cuStreamSynchronize, stream);
    CU_OK(cuStreamQuery, stream);

    CU_OK(cuEventDestroy, event);
    CU_OK(cuEventDestroy, never);
    CU_OK(cuStreamDestroy, stream);
    CU_OK(cuMemFree, src);
    CU_OK(cuMemFree, dst);
}


TEST_F(test_cudasim_stream, wait_event_across_streams)
{
    CUstream producer, consumer;
    CUdeviceptr a, b;
    unsigned char out = 0;
    CUevent event;
    gate g;

    CU_OK(cuMemAlloc, &a, 4096);
    CU_OK(cuMemAlloc, &b, 4096);
    CU_OK(cuMemsetD8, a, 0, 4096);
    CU_OK(cuMemsetD8, b, 0, 4096);
    CU_OK(cuStreamCreate, &producer, CU_STREAM_NON_BLOCKING);
    CU_OK(cuStreamCreate, &consumer, CU_STREAM_NON_BLOCKING);
    CU_OK(cuEventCreate, &event, CU_EVENT_DISABLE_TIMING);

    {
        /* the producer's memset is held; once every stream that can run has
         * run, the consumer must still wait for the event */
        copy_hold hold;
        if (!hold.held) {
            GTEST_SKIP() << "needs the emulator's copy-engine hold";
        }
        CU_OK(cuMemsetD8Async, a, 0x42, 4096, producer);
        CU_OK(cuEventRecord, event, producer);
        CU_OK(cuStreamWaitEvent, consumer, event, 0);
        CU_OK(cuMemcpyDtoDAsync, b, a, 4096, consumer);
        CU_OK(cuMemcpyDtoHAsync, &out, b + 4095, 1, consumer);

        ASSERT_TRUE(wait_quiescent());
        CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery, consumer);
        EXPECT_EQ(0, out) << "the consumer ran before the event";
        hold.release();
    }
    CU_OK(cuStreamSynchronize, consumer);
    EXPECT_EQ(0x42, out);

    /* the event may be destroyed while a wait on it is pending */
    g.set_open(false);
    CU_OK(cuLaunchHostFunc, producer, gate_func, &g);
    CU_OK(cuEventRecord, event, producer);
    CU_OK(cuStreamWaitEvent, consumer, event, 0);
    CU_OK(cuEventDestroy, event);
    g.set_open(true);
    CU_OK(cuStreamSynchronize, consumer);

    CU_OK(cuStreamDestroy, producer);
    CU_OK(cuStreamDestroy, consumer);
    CU_OK(cuMemFree, a);
    CU_OK(cuMemFree, b);
}


static void CUDA_CB append_cb(CUstream, CUresult status, void *arg)
{
    auto *p = (std::pair<std::vector<int>*, int>*)arg;
    EXPECT_EQ(CUDA_SUCCESS, status);
    p->first->push_back(p->second);
}

static void CUDA_CB append_fn(void *arg)
{
    auto *p = (std::pair<std::vector<int>*, int>*)arg;
    p->first->push_back(p->second);
}

TEST_F(test_cudasim_stream, host_functions_in_order)
{
    const int n = 200;
    std::vector<int> order;
    std::vector<std::pair<std::vector<int>*, int>> args;
    CUstream stream;

    args.reserve(n);
    CU_OK(cuStreamCreate, &stream, 0);
    for (int i = 0; i < n; ++i) {
        args.emplace_back(&order, i);
        if (i % 2) {
            CU_OK(cuStreamAddCallback, stream, append_cb, &args.back(), 0);
        } else {
            CU_OK(cuLaunchHostFunc, stream, append_fn, &args.back());
        }
    }
    CU_OK(cuStreamSynchronize, stream);
    ASSERT_EQ((size_t)n, order.size());
    for (int i = 0; i < n; ++i) {
        EXPECT_EQ(i, order[i]);
    }
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback, stream, append_cb,
              nullptr, 1);
    CU_OK(cuStreamDestroy, stream);
}


TEST_F(test_cudasim_stream, ordering_many_streams_and_threads)
{
    const int num_threads = 4, streams_per_thread = 3, iters = 200;
    const size_t slot = 256;
    CUcontext ctx;
    CUdeviceptr dev;

    CU_OK(cuCtxGetCurrent, &ctx);
    CU_OK(cuMemAlloc, &dev, num_threads * streams_per_thread * slot);

    auto worker = [&](int t) {
        std::vector<CUstream> streams(streams_per_thread);
        std::vector<std::vector<unsigned char>> src(iters),
                results(streams_per_thread * iters);

        ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx));
        for (auto &s : streams) {
            ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuStreamCreate(
                              &s, CU_STREAM_NON_BLOCKING));
        }
        for (int i = 0; i < iters; ++i) {
            src[i].assign(slot, (unsigned char)(i * 3 + t));
        }
        for (auto &r : results) {
            r.assign(slot, 0);
        }

        /* each stream: write value i, read it back, for i = 0..iters: the
         * reads see their own write only if the stream runs in order */
        for (int i = 0; i < iters; ++i) {
            for (int k = 0; k < streams_per_thread; ++k) {
                CUdeviceptr p = dev + (t * streams_per_thread + k) * slot;
                ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuMemcpyHtoDAsync(
                                  p, src[i].data(), slot, streams[k]));
                ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuMemcpyDtoHAsync(
                                  results[k * iters + i].data(), p, slot,
                                  streams[k]));
            }
        }
        for (auto &s : streams) {
            ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuStreamSynchronize(s));
            ASSERT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuStreamDestroy(s));
        }
        for (int k = 0; k < streams_per_thread; ++k) {
            for (int i = 0; i < iters; ++i) {
                EXPECT_EQ(src[i], results[k * iters + i])
                        << "thread " << t << " stream " << k << " op " << i;
            }
        }
    };

    std::vector<std::thread> threads;
    for (int t = 0; t < num_threads; ++t) {
        threads.emplace_back(worker, t);
    }
    for (auto &thr : threads) {
        thr.join();
    }
    CU_OK(cuMemFree, dev);
}


TEST_F(test_cudasim_stream, events_complete_in_order)
{
    const int n = 50;
    std::vector<CUevent> events(n);
    CUstream stream;
    CUdeviceptr dev;
    gate g;

    CU_OK(cuMemAlloc, &dev, 1 << 20);
    CU_OK(cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING);
    CU_OK(cuLaunchHostFunc, stream, gate_func, &g);
    for (int i = 0; i < n; ++i) {
        CU_OK(cuEventCreate, &events[i], CU_EVENT_DISABLE_TIMING);
        CU_OK(cuMemsetD8Async, dev, (unsigned char)i, 1 << 20, stream);
        CU_OK(cuEventRecord, events[i], stream);
    }
    for (int i = 0; i < n; ++i) {
        CU_EXPECT(CUDA_ERROR_NOT_READY, cuEventQuery, events[i]);
    }
    g.set_open(true);
    CU_OK(cuEventSynchronize, events[n / 2]);
    CU_OK(cuEventQuery, events[0]);
    CU_OK(cuStreamSynchronize, stream);
    for (int i = 0; i < n; ++i) {
        CU_OK(cuEventQuery, events[i]);
        CU_OK(cuEventDestroy, events[i]);
    }
    CU_OK(cuStreamDestroy, stream);
    CU_OK(cuMemFree, dev);
}


TEST_F(test_cudasim_stream, copies_and_memset)
{
    const size_t size = 1 << 20;
    std::vector<unsigned char> host(size), back(size);
    CUdeviceptr a, b;
    CUstream stream;

    for (size_t i = 0; i < size; ++i) {
        host[i] = (unsigned char)(i ^ (i >> 8));
    }
    CU_OK(cuMemAlloc, &a, size);
    CU_OK(cuMemAlloc, &b, size);
    CU_OK(cuStreamCreate, &stream, 0);

    CU_OK(cuMemcpyHtoD, a, host.data(), size);
    CU_OK(cuMemcpyDtoD, b, a, size);
    CU_OK(cuMemcpyDtoH, back.data(), b, size);
    EXPECT_EQ(host, back);

    /* unified copies: host and device pointers told apart by the driver */
    std::fill(back.begin(), back.end(), 0);
    CU_OK(cuMemcpy, (CUdeviceptr)back.data(), a, size);
    EXPECT_EQ(host, back);
    CU_OK(cuMemcpyAsync, b + 10, (CUdeviceptr)host.data(), 100, stream);
    CU_OK(cuMemcpyAsync, (CUdeviceptr)back.data(), b, size, stream);
    CU_OK(cuStreamSynchronize, stream);
    EXPECT_EQ(host[0], back[10]);

    CU_OK(cuMemsetD8Async, a + 5, 0xee, 1000, stream);
    CU_OK(cuMemcpyDtoHAsync, back.data(), a, size, stream);
    CU_OK(cuStreamSynchronize, stream);
    EXPECT_EQ(host[4], back[4]);
    EXPECT_EQ(0xee, back[5]);
    EXPECT_EQ(0xee, back[1004]);
    EXPECT_EQ(host[1005], back[1005]);

    /* the memset is ordered before the copy on the default stream; a
     * pageable asynchronous copy may return before it is done */
    CU_OK(cuMemsetD8, b, 0x3c, size);
    CU_OK(cuMemcpyDtoHAsync, back.data(), b, size, nullptr);
    CU_OK(cuStreamSynchronize, nullptr);
    EXPECT_EQ(std::vector<unsigned char>(size, 0x3c), back);

    CU_OK(cuMemcpyHtoDAsync, a, host.data(), 0, stream); /* empty: fine */
    CU_OK(cuStreamDestroy, stream);
    CU_OK(cuMemFree, a);
    CU_OK(cuMemFree, b);
}


/* copies long enough for the emulator's non-temporal stores
 * (cudasim_dma.c): every alignment of source and destination and lengths
 * around the store width land exactly, nothing around them changes */
TEST_F(test_cudasim_stream, long_copies_of_every_alignment)
{
    const size_t base = 64 << 10, size = base + 256;
    const size_t tails[] = {0, 1, 15, 16, 63, 64, 65, 127};
    std::vector<unsigned char> host(size), back(size), want(size);
    CUdeviceptr a, b;

    for (size_t i = 0; i < size; ++i) {
        host[i] = (unsigned char)(i * 7 + (i >> 9));
    }
    CU_OK(cuMemAlloc, &a, size);
    CU_OK(cuMemAlloc, &b, size);
    CU_OK(cuMemcpyHtoD, a, host.data(), size);
    for (size_t src_off = 0; src_off < 17; src_off += 3) {
        for (size_t dst_off = 0; dst_off < 17; ++dst_off) {
            for (size_t tail : tails) {
                size_t len = base + tail;

                CU_OK(cuMemsetD8, b, 0x5a, size);
                CU_OK(cuMemcpyDtoD, b + dst_off, a + src_off, len);
                CU_OK(cuMemcpyDtoH, back.data(), b, size);
                std::fill(want.begin(), want.end(), 0x5a);
                std::copy(host.begin() + src_off, host.begin() + src_off + len,
                          want.begin() + dst_off);
                ASSERT_EQ(want, back) << "source offset " << src_off
                                      << ", destination offset " << dst_off
                                      << ", length " << len;
            }
        }
    }
    CU_OK(cuMemFree, a);
    CU_OK(cuMemFree, b);
}


TEST_F(test_cudasim_stream, legacy_stream_waits_for_blocking_streams)
{
    CUstream blocking;
    CUdeviceptr dev;
    unsigned char out = 0;
    gate g;

    CU_OK(cuMemAlloc, &dev, 4096);
    CU_OK(cuMemsetD8, dev, 0, 4096);
    CU_OK(cuStreamCreate, &blocking, CU_STREAM_DEFAULT);
    CU_OK(cuLaunchHostFunc, blocking, gate_func, &g);
    CU_OK(cuMemsetD8Async, dev, 0x77, 4096, blocking);

    /* opened once the blocking stream is at the gate: the legacy copy
     * below is then either waiting (correct) or done with 0 (broken) */
    std::thread opener([&g] {
        g.wait_reached();
        g.set_open(true);
    });
    /* the legacy default stream waits for prior work of blocking streams;
     * a copy to host memory returns when it is done */
    CU_OK(cuMemcpyDtoH, &out, dev, 1);
    EXPECT_EQ(0x77, out);
    opener.join();
    CU_OK(cuStreamDestroy, blocking);
    CU_OK(cuMemFree, dev);
}


/* cuCtxSynchronize waits for every stream of the context, a non-blocking
 * one too: a host function held at a gate has run by its return */
TEST_F(test_cudasim_stream, context_synchronize_waits_for_every_stream)
{
    auto waiting = (int (*)(void))driver_sym("cudasim_ctx_sync_waiting");
    std::atomic<bool> ran(false), returned(false);
    CUstream nonblocking;
    gate g;

    if (waiting == nullptr) {
        GTEST_SKIP() << "needs the emulator's cudasim_ctx_sync_waiting";
    }
    CU_OK(cuStreamCreate, &nonblocking, CU_STREAM_NON_BLOCKING);
    CU_OK(cuLaunchHostFunc, nonblocking, gate_func, &g);
    CU_OK(cuLaunchHostFunc, nonblocking,
          [](void *arg) { *(std::atomic<bool>*)arg = true; }, &ran);
    /* the gate opens once we wait in cuCtxSynchronize, or once it returned
     * (then without waiting: the stream's work is still held) */
    std::thread opener([&] {
        g.wait_reached();
        while (!returned && (waiting() == 0)) {
            std::this_thread::yield();
        }
        g.set_open(true);
    });
    CUresult res = uct_cuda_ipc_ns_drv.cuCtxSynchronize();
    bool ran_at_return = ran;
    returned = true;
    opener.join();
    EXPECT_EQ(CUDA_SUCCESS, res);
    EXPECT_TRUE(ran_at_return) << "returned before the stream's work";
    CU_OK(cuStreamDestroy, nonblocking);
}


/* read device memory through a non-blocking stream, which does not wait for
 * the default stream */
static std::vector<unsigned char> read_beside(CUdeviceptr dev, size_t size,
                                              CUstream nonblocking)
{
    std::vector<unsigned char> bytes(size, 0xff);

    EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuMemcpyDtoHAsync(
                      bytes.data(), dev, size, nonblocking));
    EXPECT_EQ(CUDA_SUCCESS, uct_cuda_ipc_ns_drv.cuStreamSynchronize(
                      nonblocking));
    return bytes;
}

TEST_F(test_cudasim_stream, default_stream_work_is_asynchronous_and_ordered)
{
    const size_t size = 4096;
    const std::vector<unsigned char> zero(size, 0), set(size, 0x11);
    std::vector<unsigned char> host(size), staged;
    CUstream blocking, other, nonblocking;
    CUdeviceptr a, b, c, d;
    std::condition_variable cond;
    std::mutex lock;
    bool returned = false, late = false;
    gate g;

    for (size_t i = 0; i < size; ++i) {
        host[i] = (unsigned char)(i * 7 + 1);
    }
    staged = host;
    for (CUdeviceptr *p : {&a, &b, &c, &d}) {
        CU_OK(cuMemAlloc, p, size);
        CU_OK(cuMemsetD8, *p, 0, size);
    }
    CU_OK(cuStreamSynchronize, nullptr);
    CU_OK(cuStreamCreate, &blocking, CU_STREAM_DEFAULT);
    CU_OK(cuStreamCreate, &other, CU_STREAM_DEFAULT);
    CU_OK(cuStreamCreate, &nonblocking, CU_STREAM_NON_BLOCKING);

    /* opens the gate once the calls below returned; a call that waits for
     * its copy (a synchronous default stream) would wait for the gate: the
     * safety net then opens it and the test fails instead of hanging */
    std::thread opener([&] {
        g.wait_reached();
        std::unique_lock<std::mutex> guard(lock);
        late = !cond.wait_for(
                guard, std::chrono::milliseconds(test::hang_guard_ms(60000)),
                [&] { return returned; });
        guard.unlock();
        g.set_open(true);
    });
    CU_OK(cuLaunchHostFunc, blocking, gate_func, &g);
    /* the legacy default stream waits for the blocking stream's gate. A
     * pageable cuMemcpyHtoD synchronizes the default stream first (so it
     * comes first here), then returns once its source is staged */
    CU_OK(cuMemcpyHtoD, c, host.data(), size);
    std::fill(host.begin(), host.end(), 0x99);
    CU_OK(cuMemsetD8, a, 0x11, size);
    CU_OK(cuMemcpyDtoD, b, a, size);
    /* a blocking stream waits for the legacy stream's work */
    CU_OK(cuMemcpyDtoDAsync, d, b, size, other);

    /* the calls returned, the gate is still closed: nothing landed. On the
     * emulator, the blocking stream first runs what it can, so that one
     * not waiting for the legacy stream shows it here, not by chance */
    g.wait_reached();
    wait_stream_stalled(other);
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery, nullptr);
    CU_EXPECT(CUDA_ERROR_NOT_READY, cuStreamQuery, other);
    EXPECT_EQ(zero, read_beside(a, size, nonblocking)) << "memset landed";
    EXPECT_EQ(zero, read_beside(b, size, nonblocking)) << "DtoD landed";
    EXPECT_EQ(zero, read_beside(c, size, nonblocking)) << "HtoD landed";
    EXPECT_EQ(zero, read_beside(d, size, nonblocking))
            << "the blocking stream ran before the legacy stream's work";
    {
        std::lock_guard<std::mutex> guard(lock);
        returned = true;
        cond.notify_all();
    }
    opener.join();
    EXPECT_FALSE(late) << "a default-stream call waited for its copy";

    CU_OK(cuStreamSynchronize, other);
    EXPECT_EQ(set, read_beside(d, size, nonblocking))
            << "the blocking stream did not wait for the legacy stream";
    CU_OK(cuStreamSynchronize, nullptr);
    CU_OK(cuStreamQuery, nullptr);
    EXPECT_EQ(set, read_beside(a, size, nonblocking));
    EXPECT_EQ(set, read_beside(b, size, nonblocking));
    EXPECT_EQ(staged, read_beside(c, size, nonblocking))
            << "the HtoD copy read its source after the call returned";

    for (CUstream s : {blocking, other, nonblocking}) {
        CU_OK(cuStreamDestroy, s);
    }
    for (CUdeviceptr p : {a, b, c, d}) {
        CU_OK(cuMemFree, p);
    }
}


TEST_F(test_cudasim_stream, emulated_copy_latency_and_bad_handles)
{
    SKIP_IF_NOT_EMULATOR();
    CUstream stream;
    CUevent event;

    CU_OK(cuStreamCreate, &stream, 0);
    CU_OK(cuStreamDestroy, stream);
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery, stream);
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy, stream);
    CU_OK(cuEventCreate, &event, 0);
    CU_OK(cuEventDestroy, event);
    CU_EXPECT(CUDA_ERROR_INVALID_HANDLE, cuEventQuery, event);
    CU_EXPECT(CUDA_ERROR_INVALID_VALUE, cuEventCreate, &event,
              CU_EVENT_INTERPROCESS);
}


/* what a fatal copy error leaves behind, seen from a peer */
struct poison_reply {
    int count        = 0;
    int sync         = -1; /* the stream of the failed copy */
    int query        = -1;
    int alloc        = -1; /* cuMemAlloc in the same context */
    int stream       = -1; /* cuStreamCreate in it */
    int legacy_sync  = -1; /* its default stream */
    int other_alloc  = -1; /* cuMemAlloc in device 1's context */
    int after_reset  = -1; /* ... in device 0's once released and retained */
    int hostfn_calls = -1; /* of a cuLaunchHostFunc after the failed copy */
    int callback     = -1; /* the status a cuStreamAddCallback got */
};


/* What the host function and the callback queued after the failed copy
 * saw; the callback's status comes back through a pipe, which also tells
 * that the stream got past the host function (a synchronization of a
 * stream that failed returns at once, before its callbacks ran) */
struct poison_calls {
    std::atomic<int> hostfn{0};
    int              pipe[2] = {-1, -1};
};


static void CUDA_CB poison_hostfn(void *arg)
{
    ++((poison_calls*)arg)->hostfn;
}


static void CUDA_CB poison_callback(CUstream stream, CUresult status, void *arg)
{
    int value = status;

    (void)!write(((poison_calls*)arg)->pipe[1], &value, sizeof(value));
}

TEST_PEER_ROLE(cudasim_poison_peer)
{
    auto &drv = uct_cuda_ipc_ns_drv;
    int (*hold)(int, int) = nullptr;
    CUmemAllocationProp prop = {};
    CUmemAccessDesc access   = {};
    CUmemGenericAllocationHandle handle;
    std::vector<unsigned char> host(64, 1);
    poison_reply reply;
    poison_calls calls;
    CUcontext ctx0, ctx1;
    CUdevice dev0, dev1;
    CUdeviceptr va, dev;
    CUstream stream, other;
    size_t gran;

    prop.type          = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location    = prop.location;
    access.flags       = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (!test::cuda_init() ||
        ((hold = (int (*)(int, int))cudasim_test::driver_sym(
                  "cudasim_hold_copies")) == nullptr) ||
        (drv.cuDeviceGetCount(&reply.count) != CUDA_SUCCESS) ||
        (drv.cuMemGetAllocationGranularity(&gran, &prop,
                                           CU_MEM_ALLOC_GRANULARITY_MINIMUM) !=
         CUDA_SUCCESS) ||
        (drv.cuMemCreate(&handle, gran, &prop, 0) != CUDA_SUCCESS) ||
        (drv.cuMemAddressReserve(&va, gran, 0, 0, 0) != CUDA_SUCCESS) ||
        (drv.cuMemMap(va, gran, 0, handle, 0) != CUDA_SUCCESS) ||
        (drv.cuMemSetAccess(va, gran, &access, 1) != CUDA_SUCCESS) ||
        (drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) !=
         CUDA_SUCCESS)) {
        return 1;
    }

    /* a copy held back, its destination unmapped before it runs: on a GPU
     * an illegal address in a kernel or copy */
    hold(-1, 1);
    if ((pipe(calls.pipe) != 0) ||
        (drv.cuMemcpyHtoDAsync(va, host.data(), host.size(), stream) !=
         CUDA_SUCCESS) ||
        (drv.cuLaunchHostFunc(stream, poison_hostfn, &calls) !=
         CUDA_SUCCESS) ||
        (drv.cuStreamAddCallback(stream, poison_callback, &calls, 0) !=
         CUDA_SUCCESS) ||
        (drv.cuMemUnmap(va, gran) != CUDA_SUCCESS)) {
        return 2;
    }
    hold(-1, 0);
    struct pollfd pfd = {calls.pipe[0], POLLIN, 0};
    if ((poll(&pfd, 1, test::hang_guard_ms(30000)) == 1) &&
        (read(calls.pipe[0], &reply.callback, sizeof(reply.callback)) ==
         sizeof(reply.callback))) {
        reply.hostfn_calls = calls.hostfn;
    }
    reply.sync        = drv.cuStreamSynchronize(stream);
    reply.query       = drv.cuStreamQuery(stream);
    reply.alloc       = drv.cuMemAlloc(&dev, 4096);
    reply.stream      = drv.cuStreamCreate(&other, CU_STREAM_NON_BLOCKING);
    reply.legacy_sync = drv.cuStreamSynchronize(nullptr);

    if ((reply.count >= 2) &&
        (drv.cuDeviceGet(&dev1, 1) == CUDA_SUCCESS) &&
        (drv.cuDevicePrimaryCtxRetain(&ctx1, dev1) == CUDA_SUCCESS) &&
        (drv.cuCtxSetCurrent(ctx1) == CUDA_SUCCESS)) {
        reply.other_alloc = drv.cuMemAlloc(&dev, 4096);
    }

    /* test::cuda_init retained device 0's primary context once: its last
     * release destroys it, the next retain makes a new one */
    if ((drv.cuDeviceGet(&dev0, 0) == CUDA_SUCCESS) &&
        (drv.cuDevicePrimaryCtxRelease(dev0) == CUDA_SUCCESS) &&
        (drv.cuDevicePrimaryCtxRetain(&ctx0, dev0) == CUDA_SUCCESS) &&
        (drv.cuCtxSetCurrent(ctx0) == CUDA_SUCCESS)) {
        reply.after_reset = drv.cuMemAlloc(&dev, 4096);
    }
    return chan.send_obj(reply) ? 0 : 3;
}

/*
 * An illegal address in a stream poisons its whole context, as on a GPU
 * (cuda.h, CUDA_ERROR_ILLEGAL_ADDRESS: "any further CUDA work will return
 * the same error"), until its primary context is released and made anew;
 * another device's context is not affected. In a peer: the test process's
 * context must stay usable.
 */
TEST_F(test_cudasim_stream, emulated_illegal_address_poisons_the_context)
{
    SKIP_IF_NOT_EMULATOR();
    const char *old   = getenv("CUDASIM_DEVICE_COUNT");
    std::string saved = (old != nullptr) ? old : "";
    poison_reply reply;

    setenv("CUDASIM_DEVICE_COUNT", "2", 1);
    {
        test::peer peer("cudasim_poison_peer");
        if (old != nullptr) {
            setenv("CUDASIM_DEVICE_COUNT", saved.c_str(), 1);
        } else {
            unsetenv("CUDASIM_DEVICE_COUNT");
        }
        ASSERT_TRUE(peer.chan().recv_obj(reply));
        EXPECT_EQ(0, peer.wait());
    }
    /* cuda.h: a host function is not called after an error in the
     * context; a stream callback is, with the error */
    EXPECT_EQ(0, reply.hostfn_calls);
    for (int res : {reply.sync, reply.query, reply.alloc, reply.stream,
                    reply.legacy_sync, reply.callback}) {
        EXPECT_EQ(CUDA_ERROR_ILLEGAL_ADDRESS, res)
                << uct_cuda_ipc_ns_driver_error_name((CUresult)res);
    }
    EXPECT_EQ(2, reply.count);
    EXPECT_EQ(CUDA_SUCCESS, reply.other_alloc)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.other_alloc);
    EXPECT_EQ(CUDA_SUCCESS, reply.after_reset)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.after_reset);
}


TEST_PEER_ROLE(cudasim_latency_peer)
{
    CUdeviceptr dev;
    char byte = 0;

    if (!test::cuda_init() ||
        (uct_cuda_ipc_ns_drv.cuMemAlloc(&dev, 4096) != CUDA_SUCCESS)) {
        return 1;
    }
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 10; ++i) {
        if (uct_cuda_ipc_ns_drv.cuMemcpyHtoD(dev, &byte, 1) != CUDA_SUCCESS) {
            return 2;
        }
    }
    /* a pageable cuMemcpyHtoD returns before its copy is done */
    if (uct_cuda_ipc_ns_drv.cuStreamSynchronize(nullptr) != CUDA_SUCCESS) {
        return 2;
    }
    long long us = std::chrono::duration_cast<std::chrono::microseconds>(
                           std::chrono::steady_clock::now() - start).count();
    uct_cuda_ipc_ns_drv.cuMemFree(dev);
    return chan.send_obj(us) ? 0 : 3;
}

TEST_F(test_cudasim_stream, emulated_copy_latency)
{
    SKIP_IF_NOT_EMULATOR();
    long long us = 0;

    setenv("CUDASIM_COPY_LATENCY_US", "20000", 1);
    {
        test::peer peer("cudasim_latency_peer");
        unsetenv("CUDASIM_COPY_LATENCY_US");
        ASSERT_TRUE(peer.chan().recv_obj(us));
        EXPECT_EQ(0, peer.wait());
    }
    EXPECT_GE(us, 10 * 20000);
}


/* cuEventRecord of an event of one context on a stream of another */
struct record_ctx_reply {
    int count        = 0;
    int other_stream = -1; /* event of device 1, stream of device 0 */
    int other_legacy = -1; /* ... on the default stream of device 0 */
    int same_legacy  = -1; /* ... on the default stream of device 1 */
};

TEST_PEER_ROLE(cudasim_record_ctx_peer)
{
    record_ctx_reply reply;
    CUcontext ctx0, ctx1;
    CUstream stream0;
    CUevent event1;

    if (!test::cuda_init() ||
        (uct_cuda_ipc_ns_drv.cuDeviceGetCount(&reply.count) != CUDA_SUCCESS)) {
        return 1;
    }
    if (reply.count < 2) {
        return chan.send_obj(reply) ? 0 : 2;
    }
    if ((uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&ctx0, 0) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuDevicePrimaryCtxRetain(&ctx1, 1) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx1) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuEventCreate(&event1, CU_EVENT_DISABLE_TIMING) !=
         CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx0) != CUDA_SUCCESS) ||
        (uct_cuda_ipc_ns_drv.cuStreamCreate(&stream0, CU_STREAM_NON_BLOCKING) !=
         CUDA_SUCCESS)) {
        return 3;
    }
    reply.other_stream = uct_cuda_ipc_ns_drv.cuEventRecord(event1, stream0);
    reply.other_legacy = uct_cuda_ipc_ns_drv.cuEventRecord(event1, nullptr);
    uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx1);
    reply.same_legacy  = uct_cuda_ipc_ns_drv.cuEventRecord(event1, nullptr);
    uct_cuda_ipc_ns_drv.cuEventSynchronize(event1);
    uct_cuda_ipc_ns_drv.cuEventDestroy(event1);
    uct_cuda_ipc_ns_drv.cuCtxSetCurrent(ctx0);
    uct_cuda_ipc_ns_drv.cuStreamDestroy(stream0);
    return chan.send_obj(reply) ? 0 : 4;
}

/* cuda.h, cuEventRecord: "hEvent and hStream must be from the same context
 * otherwise CUDA_ERROR_INVALID_HANDLE is returned" */
TEST_F(test_cudasim_stream, event_recorded_only_on_its_context_streams)
{
    record_ctx_reply reply;
    const char *old = getenv("CUDASIM_DEVICE_COUNT");
    std::string saved = (old != nullptr) ? old : "";

    setenv("CUDASIM_DEVICE_COUNT", "2", 1);
    {
        test::peer peer("cudasim_record_ctx_peer");
        if (old != nullptr) {
            setenv("CUDASIM_DEVICE_COUNT", saved.c_str(), 1);
        } else {
            unsetenv("CUDASIM_DEVICE_COUNT");
        }
        ASSERT_TRUE(peer.chan().recv_obj(reply));
        EXPECT_EQ(0, peer.wait());
    }
    if (reply.count < 2) {
        GTEST_SKIP() << "needs two devices";
    }
    EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, reply.other_stream)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.other_stream);
    EXPECT_EQ(CUDA_ERROR_INVALID_HANDLE, reply.other_legacy)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.other_legacy);
    EXPECT_EQ(CUDA_SUCCESS, reply.same_legacy)
            << uct_cuda_ipc_ns_driver_error_name((CUresult)reply.same_legacy);
}


/*
 * Every mix of the default (legacy) stream with blocking and non-blocking
 * streams that the library and the benchmark use, many times over, each
 * result checked through a non-blocking stream that waits for nothing else:
 * a lost dependency reads stale bytes, a lost wake-up hangs. The loop runs
 * in a peer so that a hang fails the test (the peer's wait is the safety
 * net) instead of stopping the suite.
 */
struct cross_stream_reply {
    int  iterations = 0;
    int  stage      = 0; /* the first mix that read a wrong byte, 0: none */
    int  got        = 0;
    int  expected   = 0;
};

TEST_PEER_ROLE(cudasim_cross_stream_peer)
{
    const size_t size = 4096;
    const int iterations = 300;
    cross_stream_reply reply;
    CUstream blocking, nonblocking;
    CUevent ev, ev2;
    CUdeviceptr buf[6];
    unsigned char byte;
    CUresult res;

    auto &drv = uct_cuda_ipc_ns_drv;
    if (!test::cuda_init() ||
        (drv.cuStreamCreate(&blocking, CU_STREAM_DEFAULT) != CUDA_SUCCESS) ||
        (drv.cuStreamCreate(&nonblocking, CU_STREAM_NON_BLOCKING) !=
         CUDA_SUCCESS) ||
        (drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) ||
        (drv.cuEventCreate(&ev2, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)) {
        return 1;
    }
    for (CUdeviceptr &b : buf) {
        if (drv.cuMemAlloc(&b, size) != CUDA_SUCCESS) {
            return 1;
        }
    }
    /* the last byte of @dev, read on the non-blocking stream only */
    auto check = [&](int stage, CUdeviceptr dev, unsigned char expected) {
        byte = (unsigned char)~expected;
        if ((drv.cuMemcpyDtoHAsync(&byte, dev + size - 1, 1, nonblocking) !=
             CUDA_SUCCESS) ||
            (drv.cuStreamSynchronize(nonblocking) != CUDA_SUCCESS)) {
            return false;
        }
        if ((byte != expected) && (reply.stage == 0)) {
            reply.stage    = stage;
            reply.got      = byte;
            reply.expected = expected;
        }
        return true;
    };

    for (int i = 0; i < iterations; ++i) {
        unsigned char v = (unsigned char)(i * 3 + 1);

        /* the benchmark: default-stream copies, then a copy on a stream of
         * its own synchronized; a blocking stream waits for the legacy
         * stream's work */
        if ((drv.cuMemsetD8(buf[0], v, size) != CUDA_SUCCESS) ||
            (drv.cuMemcpyDtoD(buf[1], buf[0], size) != CUDA_SUCCESS) ||
            (drv.cuMemcpyDtoDAsync(buf[2], buf[1], size, blocking) !=
             CUDA_SUCCESS) ||
            (drv.cuStreamSynchronize(blocking) != CUDA_SUCCESS) ||
            !check(1, buf[2], v)) {
            return 2;
        }
        /* a non-blocking stream ordered after a blocking one by an event */
        if ((drv.cuMemsetD8Async(buf[3], v + 1, size, blocking) !=
             CUDA_SUCCESS) ||
            (drv.cuEventRecord(ev, blocking) != CUDA_SUCCESS) ||
            (drv.cuStreamWaitEvent(nonblocking, ev, 0) != CUDA_SUCCESS) ||
            (drv.cuMemcpyDtoDAsync(buf[4], buf[3], size, nonblocking) !=
             CUDA_SUCCESS) ||
            (drv.cuEventRecord(ev2, nonblocking) != CUDA_SUCCESS) ||
            (drv.cuEventSynchronize(ev2) != CUDA_SUCCESS) ||
            !check(2, buf[4], v + 1)) {
            return 3;
        }
        /* synchronizing the legacy stream waits for the blocking streams */
        if ((drv.cuMemsetD8Async(buf[5], v + 2, size, blocking) !=
             CUDA_SUCCESS) ||
            (drv.cuStreamSynchronize(nullptr) != CUDA_SUCCESS) ||
            !check(3, buf[5], v + 2)) {
            return 4;
        }
        /* a legacy copy after blocking-stream work, its event polled */
        if ((drv.cuMemsetD8Async(buf[0], v + 3, size, blocking) !=
             CUDA_SUCCESS) ||
            (drv.cuMemcpyDtoD(buf[1], buf[0], size) != CUDA_SUCCESS) ||
            (drv.cuEventRecord(ev, nullptr) != CUDA_SUCCESS)) {
            return 5;
        }
        while ((res = drv.cuEventQuery(ev)) == CUDA_ERROR_NOT_READY) {
        }
        if ((res != CUDA_SUCCESS) || !check(4, buf[1], v + 3)) {
            return 6;
        }
        /* a non-blocking stream's copy beside the default stream's work:
         * not ordered with it, but both complete */
        if ((drv.cuMemcpyDtoD(buf[2], buf[1], size) != CUDA_SUCCESS) ||
            (drv.cuMemcpyDtoDAsync(buf[4], buf[3], size, nonblocking) !=
             CUDA_SUCCESS) ||
            (drv.cuStreamSynchronize(nonblocking) != CUDA_SUCCESS) ||
            (drv.cuStreamSynchronize(nullptr) != CUDA_SUCCESS) ||
            !check(5, buf[2], v + 3) || !check(6, buf[4], v + 1)) {
            return 7;
        }
        reply.iterations = i + 1;
    }
    for (CUdeviceptr b : buf) {
        drv.cuMemFree(b);
    }
    drv.cuEventDestroy(ev);
    drv.cuEventDestroy(ev2);
    drv.cuStreamDestroy(blocking);
    drv.cuStreamDestroy(nonblocking);
    return chan.send_obj(reply) ? 0 : 8;
}

TEST_F(test_cudasim_stream, cross_stream_mixes_in_a_loop)
{
    cross_stream_reply reply;

    test::peer peer("cudasim_cross_stream_peer");
    /* generous: the loop takes about a second; a hang fails here */
    EXPECT_TRUE(peer.chan().recv_obj(reply, 10 * 60 * 1000))
            << "the peer hung or failed";
    EXPECT_EQ(0, peer.wait(60 * 1000));
    EXPECT_EQ(300, reply.iterations);
    EXPECT_EQ(0, reply.stage) << "mix " << reply.stage << " read "
                              << reply.got << ", expected " << reply.expected;
}



/*
 * cuda.h, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS (cuPointerSetAttribute): "the
 * region of memory that ptr points to is guaranteed to always synchronize
 * memory operations that are synchronous"; CU_CTX_SYNC_MEMOPS
 * (cuCtxSetFlags): "synchronous memory operations initiated on this context
 * will always synchronize". A default-stream cuMemcpyDtoD to such memory,
 * or in such a context, queued behind a blocking stream's closed gate,
 * returns only once the gate opened and the copy landed. The opener opens
 * the gate once the copy is queued (the default stream is not ready), and
 * notes whether the call had returned by then; the caller reads the bytes
 * beside the default stream as soon as the call returns.
 */
static void *driver_entry(const char *name)
{
    typedef __typeof__(cuGetProcAddress) get_proc_t;
    get_proc_t *get_proc = (get_proc_t*)driver_sym("cuGetProcAddress_v2");
    CUdriverProcAddressQueryResult status;
    void *func = nullptr;

    if ((get_proc == nullptr) ||
        (get_proc(name, &func, 12010, CU_GET_PROC_ADDRESS_DEFAULT,
                  &status) != CUDA_SUCCESS)) {
        return nullptr;
    }
    return func;
}

class test_cudasim_sync_memops : public test_cudasim_stream {
protected:
    /* cuMemcpyDtoD(b, a) once make_sync(b) made it synchronous */
    void check_dtod_waits(const std::function<void(CUdeviceptr)> &make_sync)
    {
        const size_t size = 4096;
        const std::vector<unsigned char> set(size, 0x5a);
        std::atomic<bool> returned(false), returned_before_open(false);
        CUstream blocking, nonblocking;
        CUdeviceptr a, b;
        gate g;

        CU_OK(cuMemAlloc, &a, size);
        CU_OK(cuMemAlloc, &b, size);
        CU_OK(cuMemsetD8, a, 0x5a, size);
        CU_OK(cuMemsetD8, b, 0, size);
        CU_OK(cuStreamSynchronize, nullptr);
        make_sync(b);
        CU_OK(cuStreamCreate, &blocking, CU_STREAM_DEFAULT);
        CU_OK(cuStreamCreate, &nonblocking, CU_STREAM_NON_BLOCKING);

        auto waiting = (int (*)(void))driver_sym("cudasim_sync_op_waiting");
        if (waiting == nullptr) {
            GTEST_SKIP() << "needs the emulator's cudasim_sync_op_waiting";
        }
        CU_OK(cuLaunchHostFunc, blocking, gate_func, &g);
        g.wait_reached();
        /* the gate opens once the call waits for its copy (queued behind
         * the gate on the legacy stream), or once it returned without */
        std::thread opener([&] {
            while (!returned && (waiting() == 0)) {
                std::this_thread::yield();
            }
            returned_before_open = returned.load();
            g.set_open(true);
        });
        CU_OK(cuMemcpyDtoD, b, a, size);
        returned = true;
        EXPECT_EQ(set, read_beside(b, size, nonblocking))
                << "cuMemcpyDtoD returned before its copy landed";
        opener.join();
        EXPECT_FALSE(returned_before_open)
                << "a synchronous cuMemcpyDtoD returned before its copy";

        CU_OK(cuStreamDestroy, blocking);
        CU_OK(cuStreamDestroy, nonblocking);
        CU_OK(cuMemFree, a);
        CU_OK(cuMemFree, b);
    }
};


TEST_F(test_cudasim_sync_memops, pointer_attribute_makes_calls_wait)
{
    typedef __typeof__(cuPointerSetAttribute) set_attr_t;
    set_attr_t *set_attr = (set_attr_t*)driver_entry("cuPointerSetAttribute");
    unsigned one = 1;

    ASSERT_NE(nullptr, set_attr);
    check_dtod_waits([&](CUdeviceptr b) {
        ASSERT_EQ(CUDA_SUCCESS,
                  set_attr(&one, CU_POINTER_ATTRIBUTE_SYNC_MEMOPS, b));
    });
}


TEST_F(test_cudasim_sync_memops, context_flag_makes_calls_wait)
{
    typedef __typeof__(cuCtxSetFlags) set_flags_t;
    typedef __typeof__(cuCtxGetFlags) get_flags_t;
    typedef __typeof__(cuDevicePrimaryCtxGetState) state_t;
    set_flags_t *set_flags = (set_flags_t*)driver_entry("cuCtxSetFlags");
    get_flags_t *get_flags = (get_flags_t*)driver_entry("cuCtxGetFlags");
    state_t *state = (state_t*)driver_entry("cuDevicePrimaryCtxGetState");
    unsigned before = 0, flags = 0;
    int active;

    ASSERT_NE(nullptr, set_flags);
    ASSERT_NE(nullptr, get_flags);
    ASSERT_NE(nullptr, state);
    ASSERT_EQ(CUDA_SUCCESS, get_flags(&before));
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, set_flags(0x100)) << "not a flag";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE,
              set_flags(CU_CTX_SCHED_SPIN | CU_CTX_SCHED_YIELD))
            << "two scheduling flags";
    EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, get_flags(nullptr));
    check_dtod_waits([&](CUdeviceptr) {
        ASSERT_EQ(CUDA_SUCCESS, set_flags(before | CU_CTX_SYNC_MEMOPS));
    });
    EXPECT_EQ(CUDA_SUCCESS, get_flags(&flags));
    EXPECT_EQ(before | CU_CTX_SYNC_MEMOPS, flags);
    EXPECT_EQ(CUDA_SUCCESS, state(0, &flags, &active));
    EXPECT_EQ(before | CU_CTX_SYNC_MEMOPS, flags) << "the primary context's";
    EXPECT_EQ(CUDA_SUCCESS, set_flags(before));
    std::thread([&] {
        EXPECT_EQ(CUDA_ERROR_INVALID_CONTEXT, set_flags(0)) << "no context";
    }).join();
}
