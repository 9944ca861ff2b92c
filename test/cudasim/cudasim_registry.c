/*
 * cudasim: registry of the device address ranges known to the driver
 * (allocations, imported IPC mappings, VMM reservations and mappings).
 */
#include "cudasim_internal.h"

static pthread_rwlock_t  cudasim_registry_lock = PTHREAD_RWLOCK_INITIALIZER;
static cudasim_region_t *cudasim_regions;


void cudasim_registry_rdlock(void)
{
    pthread_rwlock_rdlock(&cudasim_registry_lock);
}


void cudasim_registry_wrlock(void)
{
    pthread_rwlock_wrlock(&cudasim_registry_lock);
}


void cudasim_registry_unlock(void)
{
    pthread_rwlock_unlock(&cudasim_registry_lock);
}


cudasim_region_t *cudasim_region_first(void)
{
    return cudasim_regions;
}


cudasim_region_t *cudasim_region_find_kind(uintptr_t addr,
                                           cudasim_region_kind_t kind)
{
    cudasim_region_t *r;

    for (r = cudasim_regions; r != NULL; r = r->next) {
        if ((r->kind == kind) && (addr >= r->base) &&
            (addr - r->base < r->size)) {
            return r;
        }
    }
    return NULL;
}


cudasim_region_t *cudasim_region_find(uintptr_t addr)
{
    cudasim_region_t *r;

    for (r = cudasim_regions; r != NULL; r = r->next) {
        if ((r->kind != CUDASIM_REGION_VMM_RESERVE) && (addr >= r->base) &&
            (addr - r->base < r->size)) {
            return r;
        }
    }
    return NULL;
}


void *cudasim_region_alias(uintptr_t addr, size_t *avail)
{
    cudasim_region_t *r = cudasim_region_find(addr);

    if ((r == NULL) || (r->alias == NULL)) {
        return NULL;
    }
    *avail = r->base + r->size - addr;
    return (char*)r->alias + (addr - r->base);
}


void cudasim_region_insert(cudasim_region_t *region)
{
    region->next    = cudasim_regions;
    cudasim_regions = region;
}


void cudasim_region_remove(cudasim_region_t *region)
{
    cudasim_region_t **p;

    for (p = &cudasim_regions; *p != NULL; p = &(*p)->next) {
        if (*p == region) {
            *p = region->next;
            return;
        }
    }
}


int cudasim_range_check(uintptr_t addr, size_t len, int need_write,
                        int device)
{
    cudasim_region_t *r = cudasim_region_find(addr);
    size_t avail;
    int need;

    if (r == NULL) {
        /* inside a reservation but not mapped: not host memory either */
        return (cudasim_region_find_kind(addr, CUDASIM_REGION_VMM_RESERVE) ==
                NULL) ? -1 : 0;
    }

    for (;;) {
        if (r->kind == CUDASIM_REGION_VMM_MAP) {
            need = need_write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE :
                                CU_MEM_ACCESS_FLAGS_PROT_READ;
            if (((r->access & need) != need) ||
                ((device >= 0) &&
                 !(r->access_devices & (1ull << device)))) {
                return 0;
            }
        }
        avail = r->size - (addr - r->base);
        if (len <= avail) {
            return 1;
        }
        /* VMM mappings may be contiguous in VA: continue into the next */
        if (r->kind != CUDASIM_REGION_VMM_MAP) {
            return 0;
        }
        addr += avail;
        len  -= avail;
        r     = cudasim_region_find_kind(addr, CUDASIM_REGION_VMM_MAP);
        if (r == NULL) {
            return 0;
        }
    }
}
