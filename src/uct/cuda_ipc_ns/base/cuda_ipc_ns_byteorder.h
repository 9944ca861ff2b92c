/*
 * cuda_ipc_ns: little-endian loads and stores of the wire formats.
 *
 * Every field of the rkey, the addresses and the broker protocol is written
 * byte by byte through these helpers, so a format never depends on host
 * struct layout, alignment or endianness (docs/wire-format.md).
 */
#ifndef UCT_CUDA_IPC_NS_BYTEORDER_H
#define UCT_CUDA_IPC_NS_BYTEORDER_H

#include <stdint.h>


static inline void uct_cuda_ipc_ns_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

static inline void uct_cuda_ipc_ns_put_le32(uint8_t *p, uint32_t v)
{
    uct_cuda_ipc_ns_put_le16(p, (uint16_t)v);
    uct_cuda_ipc_ns_put_le16(p + 2, (uint16_t)(v >> 16));
}

static inline void uct_cuda_ipc_ns_put_le64(uint8_t *p, uint64_t v)
{
    uct_cuda_ipc_ns_put_le32(p, (uint32_t)v);
    uct_cuda_ipc_ns_put_le32(p + 4, (uint32_t)(v >> 32));
}

static inline uint16_t uct_cuda_ipc_ns_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | ((uint16_t)p[1] << 8));
}

static inline uint32_t uct_cuda_ipc_ns_get_le32(const uint8_t *p)
{
    return uct_cuda_ipc_ns_get_le16(p) |
           ((uint32_t)uct_cuda_ipc_ns_get_le16(p + 2) << 16);
}

static inline uint64_t uct_cuda_ipc_ns_get_le64(const uint8_t *p)
{
    return uct_cuda_ipc_ns_get_le32(p) |
           ((uint64_t)uct_cuda_ipc_ns_get_le32(p + 4) << 32);
}

#endif
