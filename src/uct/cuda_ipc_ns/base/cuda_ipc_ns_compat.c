/*
 * cuda_ipc_ns: UCX version differences (see cuda_ipc_ns_compat.h).
 */
#ifdef HAVE_CONFIG_H
#  include "config.h"
#endif

#include "cuda_ipc_ns_compat.h"


ucs_status_t
uct_cuda_ipc_ns_compat_config_fill(void *opts,
                                   ucs_config_global_list_entry_t *entry)
{
#if UCT_API >= UCT_VERSION(1, 15)
    return ucs_config_parser_fill_opts(opts, entry, UCS_DEFAULT_ENV_PREFIX, 0);
#else
    return ucs_config_parser_fill_opts(opts, entry->table,
                                       UCS_DEFAULT_ENV_PREFIX, entry->prefix,
                                       0);
#endif
}
