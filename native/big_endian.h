/* Big-endian integers in byte buffers, as every on-disk format of the store and Kafka's wire
 * format write them (engine/_commit_log.c, engine/_queue_core.c, protocol/_record_keys.c). */
#ifndef COMMITGATE_BIG_ENDIAN_H
#define COMMITGATE_BIG_ENDIAN_H

#include <stdint.h>

static inline uint64_t be(const uint8_t *p, int bytes)
{
    uint64_t value = 0;
    for (int i = 0; i < bytes; i++)
        value = value << 8 | p[i];
    return value;
}

static inline void put_be(uint8_t *p, uint64_t value, int bytes)
{
    for (int i = bytes - 1; i >= 0; i--, value >>= 8)
        p[i] = (uint8_t)value;
}

#endif
