/*
 * cuda_ipc_ns: copies the owner makes for importers that cannot map its
 * memory (docs/owner-copies.md).
 *
 * The serving loop hands a connection whose first request is a COPY to the
 * copier, which keeps it for that client's further COPY requests. The
 * copier has its own thread, so fd hand-out never waits for a copy: it
 * polls its clients, reads at most one request per client per round (fair
 * service) and leaves a client's socket unread while
 * UCT_CUDA_IPC_NS_COPY_QUEUE_MAX of its copies run (a bounded queue: the
 * rest waits in the client's socket). A copy runs on the copier's stream of
 * the memory's context; a host function queued after it wakes the thread,
 * which then answers. The importer's buffer is mapped from the fd the
 * request carries and kept per client (UCT_CUDA_IPC_NS_COPY_BUFFERS_MAX,
 * least recently used first out), until the client closes.
 */
#ifndef UCT_CUDA_IPC_NS_BROKER_COPY_H
#define UCT_CUDA_IPC_NS_BROKER_COPY_H

#include "cuda_ipc_ns_broker_registry.h"

#include <ucs/type/status.h>
#include <sys/types.h>
#include <stdint.h>


/* Copies of one client running at once */
#define UCT_CUDA_IPC_NS_COPY_QUEUE_MAX    8
/* Clients served at once; a newcomer beyond is closed without an answer */
#define UCT_CUDA_IPC_NS_COPY_CLIENTS_MAX  64


typedef struct uct_cuda_ipc_ns_broker_copy uct_cuda_ipc_ns_broker_copy_t;


/* Called on the copier's thread each time it closes a connection it was
 * given (the serving loop counts connections open until then) */
typedef void (*uct_cuda_ipc_ns_broker_copy_closed_cb_t)(void *arg);


/* Start the copier's thread for the broker named @a name */
ucs_status_t
uct_cuda_ipc_ns_broker_copy_start(const char *name,
                                  uct_cuda_ipc_ns_broker_registry_t *registry,
                                  uct_cuda_ipc_ns_broker_copy_closed_cb_t closed_cb,
                                  void *closed_arg,
                                  uct_cuda_ipc_ns_broker_copy_t **copier_p);


/* Wait for the copies running, answer them, close every client, stop */
void uct_cuda_ipc_ns_broker_copy_stop(uct_cuda_ipc_ns_broker_copy_t *copier);


/**
 * Give connection @a sock (of @a pid, uid already checked) to the copier,
 * with its first request @a req (a well-formed COPY; its token is copied)
 * and the fd it carried (@a buf_fd, -1 for none). The copier owns both fds
 * from now on, also when it fails.
 */
void uct_cuda_ipc_ns_broker_copy_adopt(uct_cuda_ipc_ns_broker_copy_t *copier,
                                       int sock, pid_t pid,
                                       const uct_cuda_ipc_ns_broker_proto_req_t *req,
                                       int buf_fd);


/* Copies the copiers of this process launched so far (tests and benchmarks
 * tell from it that a transfer went through the owner) */
uint64_t uct_cuda_ipc_ns_broker_copy_launched(void);

#endif
