/*
 * cuda_ipc_ns: the module's constructor and destructor. Everything the
 * module adds to UCX (both components with their transports, the library's
 * configuration for ucx_info -c, ucx_perftest's CUDA allocator) is added
 * here and only once the ABI guard found the UCX that loaded the module to
 * be the one it was built for (docs/ucx-versions.md, "The ABI guard"). On a
 * mismatch the guard writes one line and the module adds nothing: UCX runs
 * on without it.
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_abi.h"
#include "cuda_ipc_ns_cache.h"
#include "cuda_ipc_ns_md_base.h"
#include "cuda_cpy_ns_perftest.h"

#include <ucs/sys/compiler_def.h>


/* Defined by UCT_SINGLE_TL_INIT in ipc/cuda_ipc_ns_iface.c and
 * cpy/cuda_cpy_ns_iface.c */
void uct_cu_ipc_ns_init(void);
void uct_cu_ipc_ns_cleanup(void);
void uct_cu_cpy_ns_init(void);
void uct_cu_cpy_ns_cleanup(void);


static int uct_cuda_ipc_ns_module_registered = 0;


static void UCS_F_CTOR uct_cuda_ipc_ns_module_init(void)
{
    if (uct_cuda_ipc_ns_abi_admit() != UCS_OK) {
        return;
    }

    uct_cuda_ipc_ns_md_base_config_register();
    uct_cu_ipc_ns_init();
    uct_cu_cpy_ns_init();
    uct_cuda_cpy_ns_perftest_register();
    uct_cuda_ipc_ns_module_registered = 1;
}


static void UCS_F_DTOR uct_cuda_ipc_ns_module_cleanup(void)
{
    if (!uct_cuda_ipc_ns_module_registered) {
        return;
    }

    /* before libucs's destructor frees UCX's async loop */
    uct_cuda_ipc_ns_cache_unload();
    uct_cu_cpy_ns_cleanup();
    uct_cu_ipc_ns_cleanup();
    uct_cuda_ipc_ns_md_base_config_unregister();
    uct_cuda_ipc_ns_module_registered = 0;
}
