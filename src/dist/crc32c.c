/* CRC32C of tensor bytes and chunks, from Intel's ISA-L: crc32_iscsi is the
 * Castagnoli polynomial with the register seeded and returned as given, so
 * the standard CRC32C is its complement from an all-ones seed. */
#include "looptune/dist.h"

#include <isa-l/crc.h>
#include <limits.h>

uint32_t lt_crc32c(const void *data, size_t n) {
    uint32_t crc = 0xffffffffu;
    const unsigned char *p = data;
    /* crc32_iscsi takes an int length */
    while (n > 0) {
        int len = n > (size_t)INT_MAX ? INT_MAX : (int)n;
        crc = crc32_iscsi((unsigned char *)p, len, crc);
        p += len;
        n -= (size_t)len;
    }
    return ~crc;
}
