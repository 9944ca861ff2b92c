/*
 * cuda_ipc_demo: a plain CUDA driver API program sharing device memory
 * between two processes, with a legacy IPC handle and a VMM POSIX fd.
 *
 *   cuda_ipc_demo [DRIVER]     DRIVER defaults to libcuda.so.1
 *
 * It behaves the same on the emulator (test/cudasim/.libs/libcudasim.so)
 * and on a real driver. The second process is this program fork()ed and
 * exec()ed (a CUDA driver cannot be used after fork()); the two talk over a
 * socketpair, passing the VMM fd with SCM_RIGHTS. Then two points of the
 * driver's contract (docs/driver-contract.md), checked without the module:
 * over chunks mapped in a larger reservation, RANGE_* is the reservation
 * and MAPPING_* the chunk, and an unmapped hole is MAPPED 0; a CPU load of
 * device memory faults. Prints PASS and exits 0.
 */
#define _GNU_SOURCE
#include <cuda.h>

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#define DEMO_SIZE_LEGACY (1u << 20)

/* cuda.h names expand to the versioned symbols: cuMemAlloc -> cuMemAlloc_v2 */
#define DEMO_STR2(_x) #_x
#define DEMO_STR(_x)  DEMO_STR2(_x)

#define DEMO_FUNCS(_F) \
    _F(cuInit) _F(cuGetErrorName) _F(cuDeviceGet) _F(cuDeviceGetAttribute) \
    _F(cuDevicePrimaryCtxRetain) _F(cuDevicePrimaryCtxRelease) \
    _F(cuCtxSetCurrent) _F(cuMemAlloc) _F(cuMemFree) _F(cuIpcGetMemHandle) \
    _F(cuIpcOpenMemHandle) _F(cuIpcCloseMemHandle) \
    _F(cuMemGetAllocationGranularity) _F(cuMemCreate) _F(cuMemRelease) \
    _F(cuMemAddressReserve) _F(cuMemAddressFree) _F(cuMemMap) \
    _F(cuMemUnmap) _F(cuMemSetAccess) _F(cuMemExportToShareableHandle) \
    _F(cuMemImportFromShareableHandle) _F(cuStreamCreate) \
    _F(cuStreamDestroy) _F(cuStreamSynchronize) _F(cuMemcpyHtoD) \
    _F(cuMemcpyDtoH) _F(cuMemcpyHtoDAsync) _F(cuMemcpyDtoHAsync) \
    _F(cuMemsetD8Async) _F(cuPointerGetAttribute)

#define DEMO_DECLARE(_name) static __typeof__(_name) *p_##_name;
DEMO_FUNCS(DEMO_DECLARE)

typedef struct {
    CUipcMemHandle legacy;
    size_t         vmm_size;   /* 0: no VMM part */
} demo_msg_t;

#define CHECK(_call) \
    do { \
        CUresult _r = (_call); \
        if (_r != CUDA_SUCCESS) { \
            const char *_n = "?"; \
            p_cuGetErrorName(_r, &_n); \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, \
                    __LINE__, #_call, _n, (int)_r); \
            exit(1); \
        } \
    } while (0)

#define DIE(...) \
    do { \
        fprintf(stderr, __VA_ARGS__); \
        fputc('\n', stderr); \
        exit(1); \
    } while (0)


static void demo_load(const char *path)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (dl == NULL) {
        DIE("cannot load %s: %s", path, dlerror());
    }
#define DEMO_RESOLVE(_name) \
    p_##_name = (__typeof__(_name)*)dlsym(dl, DEMO_STR(_name)); \
    if (p_##_name == NULL) { \
        DIE("%s has no %s", path, DEMO_STR(_name)); \
    }
    DEMO_FUNCS(DEMO_RESOLVE)
}


static CUcontext demo_init(void)
{
    CUcontext ctx;
    CUdevice dev;

    CHECK(p_cuInit(0));
    CHECK(p_cuDeviceGet(&dev, 0));
    CHECK(p_cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(p_cuCtxSetCurrent(ctx));
    return ctx;
}


static int demo_vmm_supported(void)
{
    int vmm = 0, fd = 0;

    CHECK(p_cuDeviceGetAttribute(&vmm,
            CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0));
    CHECK(p_cuDeviceGetAttribute(&fd,
            CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 0));
    return vmm && fd;
}


static void demo_vmm_prop(CUmemAllocationProp *prop)
{
    memset(prop, 0, sizeof(*prop));
    prop->type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop->location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop->location.id          = 0;
    prop->requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}


static CUdeviceptr demo_vmm_map(CUmemGenericAllocationHandle handle,
                                size_t size)
{
    CUmemAccessDesc access;
    CUdeviceptr ptr;

    CHECK(p_cuMemAddressReserve(&ptr, size, 0, 0, 0));
    CHECK(p_cuMemMap(ptr, size, 0, handle, 0));
    memset(&access, 0, sizeof(access));
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id   = 0;
    access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(p_cuMemSetAccess(ptr, size, &access, 1));
    return ptr;
}


static void demo_vmm_unmap(CUdeviceptr ptr, size_t size)
{
    CHECK(p_cuMemUnmap(ptr, size));
    CHECK(p_cuMemAddressFree(ptr, size));
}


static uint64_t demo_attr(CUdeviceptr ptr, CUpointer_attribute attr)
{
    uint64_t value = 0;

    CHECK(p_cuPointerGetAttribute(&value, attr, ptr));
    return value;
}


/* Three chunks of the granularity mapped from the start of a reservation of
 * six, as an expandable segment: at the middle chunk RANGE_* is the
 * reservation and MAPPING_* the chunk (cuda.h); past the chunks, MAPPED 0 */
static void demo_reservation_ranges(void)
{
    CUmemGenericAllocationHandle handles[3];
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    CUdeviceptr base, mid;
    size_t gran;
    int i;

    demo_vmm_prop(&prop);
    CHECK(p_cuMemGetAllocationGranularity(&gran, &prop,
                                          CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CHECK(p_cuMemAddressReserve(&base, 6 * gran, 0, 0, 0));
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags    = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    for (i = 0; i < 3; ++i) {
        CHECK(p_cuMemCreate(&handles[i], gran, &prop, 0));
        CHECK(p_cuMemMap(base + i * gran, gran, 0, handles[i], 0));
        CHECK(p_cuMemSetAccess(base + i * gran, gran, &access, 1));
    }

    mid = base + gran + 100;
    if ((demo_attr(mid, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) != base) ||
        (demo_attr(mid, CU_POINTER_ATTRIBUTE_RANGE_SIZE) != 6 * gran)) {
        DIE("RANGE_* of a chunk is not its reservation");
    }
    if ((demo_attr(mid, CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR) !=
         base + gran) ||
        (demo_attr(mid, CU_POINTER_ATTRIBUTE_MAPPING_SIZE) != gran)) {
        DIE("MAPPING_* of a chunk is not the chunk");
    }
    if (demo_attr(base + 4 * gran, CU_POINTER_ATTRIBUTE_MAPPED) != 0) {
        DIE("an unmapped hole of a reservation is MAPPED");
    }

    for (i = 0; i < 3; ++i) {
        CHECK(p_cuMemUnmap(base + i * gran, gran));
        CHECK(p_cuMemRelease(handles[i]));
    }
    CHECK(p_cuMemAddressFree(base, 6 * gran));
    printf("reservation: RANGE_* the reservation, MAPPING_* the chunk, "
           "a hole not mapped\n");
}


/* A CPU load of device memory faults (in a fork()ed child, which makes no
 * CUDA call) */
static void demo_cpu_access_faults(CUdeviceptr ptr)
{
    pid_t pid;
    int status;

    pid = fork();
    if (pid < 0) {
        DIE("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        volatile unsigned char c = *(volatile unsigned char*)(uintptr_t)ptr;
        (void)c;
        _exit(0);
    }
    if (waitpid(pid, &status, 0) != pid) {
        DIE("waitpid: %s", strerror(errno));
    }
    if (!WIFSIGNALED(status) ||
        ((WTERMSIG(status) != SIGSEGV) && (WTERMSIG(status) != SIGBUS))) {
        DIE("a CPU load of device memory did not fault (status 0x%x)",
            status);
    }
    printf("device memory: a CPU load faults (signal %d)\n",
           WTERMSIG(status));
}


static void demo_pattern(unsigned char *buf, size_t size, unsigned seed)
{
    size_t i;

    for (i = 0; i < size; ++i) {
        buf[i] = (unsigned char)(i * 7 + seed);
    }
}


static void demo_verify(CUdeviceptr ptr, size_t size, unsigned seed,
                        CUstream stream, const char *what)
{
    unsigned char *expect = malloc(size), *got = malloc(size);

    if ((expect == NULL) || (got == NULL)) {
        DIE("out of memory");
    }
    demo_pattern(expect, size, seed);
    memset(got, 0, size);
    CHECK(p_cuMemcpyDtoHAsync(got, ptr, size, stream));
    CHECK(p_cuStreamSynchronize(stream));
    if (memcmp(expect, got, size)) {
        DIE("[%d] %s: data mismatch", (int)getpid(), what);
    }
    free(expect);
    free(got);
}


static void demo_write(CUdeviceptr ptr, size_t size, unsigned seed,
                       CUstream stream)
{
    unsigned char *buf = malloc(size);

    if (buf == NULL) {
        DIE("out of memory");
    }
    demo_pattern(buf, size, seed);
    CHECK(p_cuMemcpyHtoDAsync(ptr, buf, size, stream));
    CHECK(p_cuStreamSynchronize(stream));
    free(buf);
}


static int demo_send(int sock, const void *buf, size_t len, int fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {(void*)buf, len};
    struct msghdr msg;
    struct cmsghdr *cmsg;

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov    = &iov;
    msg.msg_iovlen = 1;
    if (fd >= 0) {
        memset(cbuf, 0, sizeof(cbuf));
        msg.msg_control    = cbuf;
        msg.msg_controllen = sizeof(cbuf);
        cmsg               = CMSG_FIRSTHDR(&msg);
        cmsg->cmsg_level   = SOL_SOCKET;
        cmsg->cmsg_type    = SCM_RIGHTS;
        cmsg->cmsg_len     = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
    }
    return (sendmsg(sock, &msg, 0) == (ssize_t)len) ? 0 : -1;
}


static int demo_recv(int sock, void *buf, size_t len, int *fd_p)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {buf, len};
    struct msghdr msg;
    struct cmsghdr *cmsg;
    ssize_t n;

    memset(&msg, 0, sizeof(msg));
    msg.msg_iov        = &iov;
    msg.msg_iovlen     = 1;
    msg.msg_control    = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    do {
        n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while ((n < 0) && (errno == EINTR));
    if (n != (ssize_t)len) {
        return -1;
    }
    if (fd_p != NULL) {
        *fd_p = -1;
        for (cmsg = CMSG_FIRSTHDR(&msg); cmsg != NULL;
             cmsg = CMSG_NXTHDR(&msg, cmsg)) {
            if ((cmsg->cmsg_level == SOL_SOCKET) &&
                (cmsg->cmsg_type == SCM_RIGHTS)) {
                memcpy(fd_p, CMSG_DATA(cmsg), sizeof(int));
            }
        }
    }
    return 0;
}


/* second process: map both, check the first pattern, write the second */
static int demo_child(int sock)
{
    CUmemGenericAllocationHandle vmm_handle;
    CUdeviceptr legacy, vmm = 0;
    demo_msg_t msg;
    CUstream stream;
    CUcontext ctx;
    char done = 'D';
    int fd = -1;

    ctx = demo_init();
    if (demo_recv(sock, &msg, sizeof(msg), &fd) != 0) {
        DIE("child: receive failed");
    }
    CHECK(p_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    CHECK(p_cuIpcOpenMemHandle(&legacy, msg.legacy,
                               CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    demo_verify(legacy, DEMO_SIZE_LEGACY, 1, stream, "legacy, in child");
    demo_write(legacy, DEMO_SIZE_LEGACY, 2, stream);

    if (msg.vmm_size > 0) {
        if (fd < 0) {
            DIE("child: no fd received");
        }
        CHECK(p_cuMemImportFromShareableHandle(&vmm_handle,
                                               (void*)(uintptr_t)fd,
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
        close(fd);
        vmm = demo_vmm_map(vmm_handle, msg.vmm_size);
        CHECK(p_cuMemRelease(vmm_handle)); /* the mapping keeps it */
        demo_verify(vmm, msg.vmm_size, 3, stream, "VMM, in child");
        demo_write(vmm, msg.vmm_size, 4, stream);
    }

    CHECK(p_cuStreamSynchronize(stream));
    if (demo_send(sock, &done, 1, -1) != 0) {
        DIE("child: send failed");
    }
    /* wait for the parent to check our writes before unmapping */
    if (demo_recv(sock, &done, 1, NULL) != 0) {
        DIE("child: receive failed");
    }

    if (vmm != 0) {
        demo_vmm_unmap(vmm, msg.vmm_size);
    }
    CHECK(p_cuIpcCloseMemHandle(legacy));
    CHECK(p_cuStreamDestroy(stream));
    CHECK(p_cuDevicePrimaryCtxRelease(0));
    (void)ctx;
    return 0;
}


static int demo_parent(const char *self, const char *driver)
{
    CUmemGenericAllocationHandle vmm_handle = 0;
    CUmemAllocationProp prop;
    CUdeviceptr legacy, vmm = 0;
    char arg_fd[16], done;
    demo_msg_t msg;
    CUstream stream;
    int sv[2], status, fd = -1;
    pid_t pid;

    demo_init();
    CHECK(p_cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));

    memset(&msg, 0, sizeof(msg));
    CHECK(p_cuMemAlloc(&legacy, DEMO_SIZE_LEGACY));
    demo_write(legacy, DEMO_SIZE_LEGACY, 1, stream);
    CHECK(p_cuIpcGetMemHandle(&msg.legacy, legacy));

    if (demo_vmm_supported()) {
        demo_vmm_prop(&prop);
        CHECK(p_cuMemGetAllocationGranularity(&msg.vmm_size, &prop,
                                              CU_MEM_ALLOC_GRANULARITY_MINIMUM));
        msg.vmm_size *= 2;
        CHECK(p_cuMemCreate(&vmm_handle, msg.vmm_size, &prop, 0));
        vmm = demo_vmm_map(vmm_handle, msg.vmm_size);
        demo_write(vmm, msg.vmm_size, 3, stream);
        CHECK(p_cuMemExportToShareableHandle(&fd, vmm_handle,
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                                             0));
    } else {
        printf("VMM with POSIX fds not supported: legacy IPC only\n");
    }

    if (socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv) != 0) {
        DIE("socketpair: %s", strerror(errno));
    }
    pid = fork();
    if (pid < 0) {
        DIE("fork: %s", strerror(errno));
    }
    if (pid == 0) {
        /* only exec: the driver must not be used after fork() */
        close(sv[0]);
        snprintf(arg_fd, sizeof(arg_fd), "%d", sv[1]);
        execl(self, self, driver, "--child", arg_fd, (char*)NULL);
        _exit(127);
    }
    close(sv[1]);

    if (demo_send(sv[0], &msg, sizeof(msg), fd) != 0) {
        DIE("send failed");
    }
    if (fd >= 0) {
        close(fd);
    }
    if (demo_recv(sv[0], &done, 1, NULL) != 0) {
        DIE("child failed before writing");
    }
    demo_verify(legacy, DEMO_SIZE_LEGACY, 2, stream, "legacy, in parent");
    if (vmm != 0) {
        demo_verify(vmm, msg.vmm_size, 4, stream, "VMM, in parent");
    }
    demo_send(sv[0], &done, 1, -1);

    if (waitpid(pid, &status, 0) != pid) {
        DIE("waitpid: %s", strerror(errno));
    }
    if (!WIFEXITED(status) || (WEXITSTATUS(status) != 0)) {
        DIE("child failed (status 0x%x)", status);
    }
    close(sv[0]);

    demo_cpu_access_faults(legacy);
    if (vmm != 0) {
        demo_cpu_access_faults(vmm);
        demo_vmm_unmap(vmm, msg.vmm_size);
        CHECK(p_cuMemRelease(vmm_handle));
        demo_reservation_ranges();
    }
    CHECK(p_cuMemFree(legacy));
    CHECK(p_cuStreamDestroy(stream));
    CHECK(p_cuDevicePrimaryCtxRelease(0));
    printf("PASS\n");
    return 0;
}


int main(int argc, char **argv)
{
    const char *driver = (argc > 1) ? argv[1] : "libcuda.so.1";
    char self[4096];
    ssize_t len;

    demo_load(driver);
    if ((argc > 3) && !strcmp(argv[2], "--child")) {
        return demo_child(atoi(argv[3]));
    }

    len = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (len < 0) {
        DIE("readlink(/proc/self/exe): %s", strerror(errno));
    }
    self[len] = '\0';
    setvbuf(stdout, NULL, _IONBF, 0);
    return demo_parent(self, driver);
}
