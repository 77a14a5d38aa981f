/* UTF-8 validation and decoding (RFC 3629): protobuf strings must be valid
 * UTF-8, and JSON output must stay valid whatever a record holds. */
#include "utf8.h"

size_t lt__utf8_next(const uint8_t *s, size_t n, uint32_t *cp) {
    if (n == 0) return 0;
    uint8_t b = s[0];
    if (b < 0x80) {
        *cp = b;
        return 1;
    }
    size_t len;
    uint32_t v, min;
    if ((b & 0xe0) == 0xc0) {
        len = 2, v = b & 0x1f, min = 0x80;
    } else if ((b & 0xf0) == 0xe0) {
        len = 3, v = b & 0x0f, min = 0x800;
    } else if ((b & 0xf8) == 0xf0) {
        len = 4, v = b & 0x07, min = 0x10000;
    } else {
        return 0; /* a continuation byte or 0xf8.. where a sequence should start */
    }
    if (n < len) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        v = (v << 6) | (s[i] & 0x3f);
    }
    if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
    *cp = v;
    return len;
}

bool lt__utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    uint32_t cp;
    while (i < n) {
        size_t l = lt__utf8_next(s + i, n - i, &cp);
        if (!l) return false;
        i += l;
    }
    return true;
}
