/*
 * Fabric handles in tests: the emulator's IMEX channel and domain for a
 * test and the peers it starts, a FABRIC allocation, and the importing
 * peer's messages. The same tests run on a GPU, where the machine's
 * channels and domain are used and a test skips where they are absent.
 */
#ifndef TEST_CUDASIM_FABRIC_ENV_H
#define TEST_CUDASIM_FABRIC_ENV_H

#include "cudasim_test.h"
#include "common/scoped_env.h"
#include "common/scratch_dir.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace cudasim_test {

/* where the driver looks for IMEX channels (cuda.h, cuMemCreate): the
 * emulator's variable, unset on a GPU machine (read before the driver
 * loads, in a peer) */
static inline std::string imex_channels_dir()
{
    const char *dir = getenv("CUDASIM_IMEX_CHANNELS");

    if ((dir != nullptr) && (*dir != '\0')) {
        return dir;
    }
    return "/dev/nvidia-caps-imex-channels";
}

/* a channel<N> this process may read and write, as UCX checks it */
static inline bool has_imex_channel()
{
    std::string dir = imex_channels_dir();
    DIR *d          = opendir(dir.c_str());
    struct dirent *entry;
    bool found = false;

    if (d == nullptr) {
        return false;
    }
    while (!found && ((entry = readdir(d)) != nullptr)) {
        found = !strncmp(entry->d_name, "channel", 7) &&
                !access((dir + "/" + entry->d_name).c_str(), R_OK | W_OK);
    }
    closedir(d);
    return found;
}

static inline bool fabric_attribute(int device = 0)
{
    int value = 0;

    return (uct_cuda_ipc_ns_drv.cuDeviceGetAttribute(
                    &value, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED,
                    device) == CUDA_SUCCESS) &&
           (value != 0);
}

/* files in @a dir (-1: cannot read it) */
static inline int count_files(const std::string &dir)
{
    DIR *d = opendir(dir.c_str());
    struct dirent *entry;
    int n = 0;

    if (d == nullptr) {
        return -1;
    }
    while ((entry = readdir(d)) != nullptr) {
        n += (strcmp(entry->d_name, ".") && strcmp(entry->d_name, ".."));
    }
    closedir(d);
    return n;
}

/*
 * On the emulator: fabric handles on every GPU, an IMEX channel (channel0)
 * and a domain of its own, for this process (the emulator reads them at each
 * call) and the peers it starts. On a GPU: nothing, the machine's.
 */
class fabric_env {
public:
    fabric_env() :
        m_channels("cudasim-imex-channels"), m_domain("cudasim-imex-domain")
    {
        if (!is_emulator()) {
            return;
        }
        int fd = open((m_channels.path() + "/channel0").c_str(),
                      O_CREAT | O_RDWR | O_CLOEXEC, 0600);
        if (fd >= 0) {
            close(fd);
        }
        m_env.emplace_back(new test::scoped_env("CUDASIM_FABRIC", "all"));
        m_env.emplace_back(new test::scoped_env("CUDASIM_IMEX_CHANNELS",
                                                m_channels.path()));
        m_env.emplace_back(new test::scoped_env("CUDASIM_IMEX_DOMAIN",
                                                m_domain.path()));
    }

    /* device 0 supports fabric handles and this process has a channel */
    static bool usable()
    {
        return fabric_attribute(0) && has_imex_channel();
    }

    const std::string &domain() const { return m_domain.path(); }
    const std::string &channels() const { return m_channels.path(); }

private:
    test::scratch_dir                              m_channels;
    test::scratch_dir                              m_domain;
    std::vector<std::unique_ptr<test::scoped_env>> m_env;
};


static inline CUmemAllocationProp fabric_prop(unsigned extra_types = 0)
{
    CUmemAllocationProp prop = {};

    prop.type                 = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type        = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id          = 0;
    prop.requestedHandleTypes = (CUmemAllocationHandleType)
                                (CU_MEM_HANDLE_TYPE_FABRIC | extra_types);
    return prop;
}


/* Memory mapped on device 0 with read-write access: a new FABRIC allocation
 * (handle 0 here) or an imported one; the CUresult of each step, the first
 * failure ending it */
class fabric_mapping {
public:
    fabric_mapping() = default;
    ~fabric_mapping() { unmap(); }
    fabric_mapping(const fabric_mapping&) = delete;
    fabric_mapping &operator=(const fabric_mapping&) = delete;

    /* maps allocation @a handle of @a size bytes, which it releases */
    CUresult map(CUmemGenericAllocationHandle handle, size_t size)
    {
        CUmemAccessDesc access = {};
        CUresult res;

        m_handle = handle;
        m_size   = size;
        m_held   = true;
        res      = uct_cuda_ipc_ns_drv.cuMemAddressReserve(&m_ptr, size, 0, 0,
                                                           0);
        if (res != CUDA_SUCCESS) {
            return res;
        }
        res = uct_cuda_ipc_ns_drv.cuMemMap(m_ptr, size, 0, handle, 0);
        if (res != CUDA_SUCCESS) {
            uct_cuda_ipc_ns_drv.cuMemAddressFree(m_ptr, size);
            m_ptr = 0;
            return res;
        }
        access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        access.location.id   = 0;
        access.flags         = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
        m_mapped             = true;
        return uct_cuda_ipc_ns_drv.cuMemSetAccess(m_ptr, size, &access, 1);
    }

    CUresult create(size_t size, unsigned extra_types = 0)
    {
        CUmemAllocationProp prop = fabric_prop(extra_types);
        CUmemGenericAllocationHandle handle;
        CUresult res;

        res = uct_cuda_ipc_ns_drv.cuMemCreate(&handle, size, &prop, 0);
        return (res == CUDA_SUCCESS) ? map(handle, size) : res;
    }

    /* unmaps and releases the handle: the memory is ours no longer */
    void unmap()
    {
        if (m_mapped) {
            uct_cuda_ipc_ns_drv.cuMemUnmap(m_ptr, m_size);
            uct_cuda_ipc_ns_drv.cuMemAddressFree(m_ptr, m_size);
            m_mapped = false;
        }
        if (m_held) {
            uct_cuda_ipc_ns_drv.cuMemRelease(m_handle);
            m_held = false;
        }
    }

    CUdeviceptr ptr() const { return m_ptr; }
    CUmemGenericAllocationHandle handle() const { return m_handle; }

    CUresult export_handle(CUmemFabricHandle *out) const
    {
        return uct_cuda_ipc_ns_drv.cuMemExportToShareableHandle(
                out, m_handle, CU_MEM_HANDLE_TYPE_FABRIC, 0);
    }

    /* the bytes of seed @a seed, by device copies (the CPU has no access to
     * device memory) */
    bool fill(uint32_t seed) const
    {
        std::vector<uint8_t> bytes = test::seed_pattern(seed, m_size);

        return (uct_cuda_ipc_ns_drv.cuMemcpyHtoD(m_ptr, bytes.data(),
                                                 m_size) == CUDA_SUCCESS) &&
               (uct_cuda_ipc_ns_drv.cuStreamSynchronize(nullptr) ==
                CUDA_SUCCESS);
    }

    bool holds(uint32_t seed) const
    {
        std::vector<uint8_t> bytes(m_size);

        return (uct_cuda_ipc_ns_drv.cuMemcpyDtoH(bytes.data(), m_ptr,
                                                 m_size) == CUDA_SUCCESS) &&
               (bytes == test::seed_pattern(seed, m_size));
    }

private:
    CUmemGenericAllocationHandle m_handle = 0;
    CUdeviceptr                  m_ptr    = 0;
    size_t                       m_size   = 0;
    bool                         m_held   = false;
    bool                         m_mapped = false;
};


/* To the importing peer (role fabric_import_peer, test_cudasim_fabric.cc) */
struct fabric_import_msg {
    CUmemFabricHandle handle;
    uint64_t          size;
    uint32_t          seed;          /* the exporter's bytes */
    uint8_t           hide_channels; /* an empty tmpfs over the channels'
                                      * directory first, as a pod without
                                      * a channel */
};

struct fabric_import_reply {
    CUresult create;   /* cuMemCreate(FABRIC) there, with hide_channels */
    CUresult import;
    CUresult map;
    bool     data_ok;  /* it read seed */
    bool     wrote;    /* it wrote seed + 1 */
    CUuuid   uuid;     /* of its device 0 */
    char     host[64]; /* its host name */
    char     boot_id[40];
};

/* then the test sends 'R' (the exporter released its handle: the peer
 * checks seed + 1 and writes seed + 2, answering a bool) or 'D' (done) */
const char FABRIC_PEER_RECHECK = 'R', FABRIC_PEER_DONE = 'D';

} // namespace cudasim_test

#endif
