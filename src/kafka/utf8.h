/* UTF-8 validation and decoding for the wire codec and the JSON writer. */
#ifndef LT_KAFKA_UTF8_H
#define LT_KAFKA_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Length (1..4) of the well-formed UTF-8 sequence at s (n bytes left), with
 * its code point in *cp; 0 if the bytes there are not well-formed UTF-8
 * (overlong forms, surrogates and code points past U+10FFFF included). */
size_t lt__utf8_next(const uint8_t *s, size_t n, uint32_t *cp);
bool lt__utf8_valid(const uint8_t *s, size_t n);

#endif
