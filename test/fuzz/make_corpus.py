#!/usr/bin/env python3
"""
Seed corpus for fuzz_rkey_parse: valid cuda_ipc_ns rkeys and edge cases,
encoded here from the layout in src/uct/cuda_ipc_ns/ipc/cuda_ipc_ns_rkey.h
(independently of the C packer).

usage: make_corpus.py [OUTDIR]   (default: corpus/ next to this script)
"""
import os
import struct
import sys

BASE_SIZE = 101
PACKED_SIZE = 248
EXT_FLAG = 0x80000000
LEGACY, POSIX_FD, CHUNKS, COPY, POOL = 1, 2, 3, 4, 5
BROKER_MAGIC = 0x736e6963


def base_key(htype, handle, pid, base, length, uuid, ext):
    assert len(handle) == 64 and len(uuid) == 16
    pid_word = pid | (EXT_FLAG if ext else 0)
    key = struct.pack('<B64sIQQ16s', htype, handle, pid_word, base, length,
                      uuid)
    assert len(key) == BASE_SIZE
    return key


def legacy_handle():
    return bytes(range(64))


def posix_handle(fd, alloc_id):
    return struct.pack('<iQ', fd, alloc_id) + bytes(52)


def ext(pid_ns, start_time, version=1, posix=None, extra=b''):
    body = struct.pack('<QQ', pid_ns, start_time)
    if posix is not None:
        token, addr = posix
        assert len(token) == 16
        body += token + struct.pack('<B', len(addr)) + addr
    body += extra
    return struct.pack('<BB', 2 + len(body), version) + body


def pad(b):
    return b + bytes(max(0, PACKED_SIZE - len(b)))


UUID = bytes(range(0xa0, 0xb0))
TOKEN = bytes(range(0xc0, 0xd0))
ABSTRACT = b'\0cuda_ipc_ns-0123abcd'
PATHNAME = b'/tmp/cuda_ipc_ns.d/broker-4242.sock'


def corpus():
    lb = base_key(LEGACY, legacy_handle(), 0x1234, 0x7f1234560000, 0x200000,
                  UUID, False)
    lx = base_key(LEGACY, legacy_handle(), 0x1234, 0x7f1234560000, 0x200000,
                  UUID, True)
    px = base_key(POSIX_FD, posix_handle(7, 0x0102030405060708), 0xabcdef,
                  0x7f0000200000, 1 << 30, UUID, True)
    pn = base_key(POSIX_FD, posix_handle(7, 0x0102030405060708), 0xabcdef,
                  0x7f0000200000, 1 << 30, UUID, False)
    e_legacy = ext(0xf0000123, 0x1122334455667788)
    e_posix = ext(0xf0000456, 0xabcdef, posix=(TOKEN, ABSTRACT))

    c = {}
    # valid keys
    c['legacy_base'] = lb
    c['legacy_base_padded'] = pad(lb)
    c['legacy_ext'] = pad(lx + e_legacy)
    c['legacy_ext_exact'] = lx + e_legacy
    c['posix_abstract'] = pad(px + e_posix)
    c['posix_abstract_exact'] = px + e_posix
    c['posix_pathname'] = pad(px + ext(1, 2, posix=(TOKEN, PATHNAME)))
    c['posix_addr_max'] = pad(px + ext(1, 2, posix=(TOKEN, b'x' * 108)))
    c['posix_no_addr'] = pad(px + ext(1, 2, posix=(TOKEN, b'')))
    c['posix_v2'] = pad(px + ext(0xf0000456, 0xabcdef, version=2,
                                 posix=(TOKEN, ABSTRACT),
                                 extra=bytes.fromhex('deadbeeffeedface')))
    # a legacy key its owner copies (version 2: token and broker address)
    c['legacy_owner_copy'] = pad(lx + ext(0xf0000123, 0x1122334455667788,
                                          version=2,
                                          posix=(TOKEN, ABSTRACT)))
    c['legacy_v2'] = pad(lx + ext(0xf0000123, 0x1122334455667788, version=3,
                                  posix=(TOKEN, ABSTRACT),
                                  extra=bytes(range(1, 9))))
    # malformed / edge
    c['empty'] = b''
    c['short_100'] = lb[:100]
    c['bad_type_0'] = pad(b'\0' + lb[1:])
    c['bad_type_3'] = pad(b'\x03' + lx[1:] + e_legacy)
    c['ext_flag_no_room'] = lx
    c['ext_flag_one_byte'] = lx + b'\x12'
    c['ext_version_0'] = pad(lx + e_legacy[:1] + b'\0' + e_legacy[2:])
    c['ext_len_17'] = pad(lx + b'\x11' + e_legacy[1:])
    c['ext_len_past_end'] = lx + e_legacy[:-1]
    c['ext_len_255'] = pad(lx + b'\xff' + e_legacy[1:])
    c['posix_no_ext'] = pad(pn)
    big = ext(1, 2, posix=(TOKEN, b'y' * 108))
    c['posix_addr_109'] = (px + b'\xff' + big[1:34] + b'\x6d' +
                           big[35:] + bytes(255 - len(big)))
    c['posix_addr_past_ext'] = pad(px + e_posix[:34] + b'\x16' +
                                   e_posix[35:])
    # a registration of 2,048 chunks (handle type 3)
    cx = base_key(CHUNKS, struct.pack('<iQI', -1, 0x0877665544332211, 2048) +
                  bytes(48), 0xabcdef, 0x7f0000200000, 40 << 30, UUID, True)
    c['chunks_abstract'] = pad(cx + e_posix)
    c['chunks_zero'] = pad(base_key(CHUNKS, struct.pack('<iQI', -1, 1, 0) +
                                    bytes(48), 0xabcdef, 0x7f0000200000,
                                    1 << 30, UUID, True) + e_posix)
    # memory only its owner copies (handle type 4): no handle, the
    # extension of a posix fd key
    kx = base_key(COPY, bytes(64), 0xabcdef, 0x7f0000200000, 1 << 30, UUID,
                  True)
    c['copy_abstract'] = pad(kx + e_posix)
    c['copy_no_ext'] = pad(base_key(COPY, bytes(64), 0xabcdef, 0x7f0000200000,
                                    1 << 30, UUID, False))
    c['copy_no_addr'] = pad(kx + ext(1, 2, posix=(TOKEN, b'')))
    # an allocation of a stream-ordered pool (handle type 5): its export
    # data as handle, the pool's fd after the broker address
    ox = base_key(POOL, bytes(range(0x80, 0xc0)), 0xabcdef, 0x7f0000200000,
                  1 << 30, UUID, True)
    c['pool_abstract'] = pad(ox + ext(0xf0000456, 0xabcdef,
                                      posix=(TOKEN, ABSTRACT),
                                      extra=struct.pack('<i', 1066)))
    c['pool_addr_max'] = pad(ox + ext(1, 2, posix=(TOKEN, b'x' * 108),
                                      extra=struct.pack('<i', 7)))
    c['pool_no_fd'] = pad(ox + e_posix)
    # broker messages (the target parses them too)
    head = struct.pack('<IHH', BROKER_MAGIC, 1, 2) + \
        struct.pack('<Q', 0x0807060504030201)
    c['broker_layout_req'] = head + TOKEN + struct.pack('<I', 128)
    c['broker_chunk_fds_req'] = (struct.pack('<IHH', BROKER_MAGIC, 1, 5) +
                                 head[8:] + TOKEN +
                                 struct.pack('<II', 2032, 16))
    c['broker_chunk_fds_reply'] = (
        struct.pack('<IHHQII', BROKER_MAGIC, 1, 0, 0x0807060504030201, 5, 2) +
        struct.pack('<QQ', 0x11, 0x12))
    c['broker_get_fd_req'] = (struct.pack('<IHH', BROKER_MAGIC, 1, 1) +
                              head[8:] + TOKEN)
    c['broker_layout_reply'] = (
        struct.pack('<IHHQIII', BROKER_MAGIC, 1, 0, 0x0807060504030201, 3,
                    1, 2) +
        struct.pack('<QQQ', 20 << 20, 20 << 20, 0x11) +
        struct.pack('<QQQ', 40 << 20, 2 << 20, 0x12))
    c['broker_layout_refused'] = struct.pack('<IHHQ', BROKER_MAGIC, 1, 4,
                                             0x0807060504030201)
    # copies made by the owner: a put and its answer (dir u16, flags u16)
    c['broker_copy_req'] = (struct.pack('<IHH', BROKER_MAGIC, 1, 4) +
                            head[8:] + TOKEN +
                            struct.pack('<QQQQQQI', 9, 1 << 20, 4096, 0x77,
                                        2 << 20, 0x40, 2))
    # a get into a host buffer (the pinned host ring: flags bit 0)
    c['broker_copy_req_host'] = (struct.pack('<IHH', BROKER_MAGIC, 1, 4) +
                                 head[8:] + TOKEN +
                                 struct.pack('<QQQQQQHH', 9, 1 << 20, 4096,
                                             0x77, 2 << 20, 0x40, 1, 1))
    c['broker_copy_reply'] = (struct.pack('<IHHQ', BROKER_MAGIC, 1, 0,
                                          0x0807060504030201) +
                              struct.pack('<Q', 9))
    # addresses (the target parses them too)
    c['device_addr'] = struct.pack('<QB', 0x0123456789abcdef, 7)
    c['iface_addr'] = struct.pack('<IQB', 0x12345, 0xeffffffc, 3)
    return c


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, 'corpus')
    os.makedirs(out, exist_ok=True)
    for name, data in sorted(corpus().items()):
        assert len(data) < 256 or name == 'posix_addr_109', name
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)
    print('wrote %d seeds to %s' % (len(corpus()), out))


if __name__ == '__main__':
    main()
