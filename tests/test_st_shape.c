/* test_st_shape.c — a safetensors header whose shape multiplies past 2^40 elements is refused as such, with the
 * shape in the message, never wrapped around 2^64 to a small element count (which then reads as "N bytes for 0
 * elements"); a zero dimension is 0 elements whatever the others are; shapes at the limit still parse. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "model/safetensors.h"
#include "base/util.h"

/* One tensor "t" of the given dtype and shape, with `bytes` bytes of data; parsed; 0 or -1 (frigg_error()). */
static int parse_one(const char *dtype, const char *shape, size_t bytes) {
    char header[512];
    int hn = snprintf(header, sizeof header, "{\"t\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":[0,%zu]}}", dtype,
                      shape, bytes);
    size_t size = 8 + (size_t)hn + bytes;
    unsigned char *buf = frigg_xcalloc(1, size);
    for (int i = 0; i < 8; i++) buf[i] = (unsigned char)((uint64_t)hn >> (8 * i));
    memcpy(buf + 8, header, (size_t)hn);
    frigg_st_set s = {0};
    int rc = frigg_st_parse(&s, buf, size, "mem", 0);
    frigg_st_close(&s);
    free(buf);
    return rc;
}

static void refused(const char *dtype, const char *shape, size_t bytes, const char *want) {
    int rc = parse_one(dtype, shape, bytes);
    CHECK(rc == -1 && strstr(frigg_error(), want), "%s %s: %s", dtype, shape, rc ? frigg_error() : "accepted");
}

int main(void) {
    TEST_MAIN_BEGIN("test_st_shape");
    /* 2^32 * 2^32 = 2^64 wraps to 0 in 64 bits; 2^21 * 2^21 * 2^21 = 2^63 does not wrap but is past 2^40 */
    refused("BF16", "[4294967296,4294967296]", 4194304, "shape [4294967296, 4294967296] has more than 2^40 elements");
    refused("BF16", "[4294967296,4294967296,2]", 4194304, "has more than 2^40 elements");
    refused("F32", "[2097152,2097152,2097152]", 64, "shape [2097152, 2097152, 2097152] has more than 2^40 elements");
    refused("BF16", "[1099511627776,2]", 64, "has more than 2^40 elements");
    refused("BF16", "[1099511627777]", 64, "shape entry 0 must be an integer in [0, 2^40]");
    refused("BF16", "[-1,2]", 64, "shape entry 0 must be an integer");
    /* a zero dimension: 0 elements, 0 bytes, whatever the others are */
    CHECK(parse_one("BF16", "[4294967296,4294967296,0]", 0) == 0, "zero dimension: %s", frigg_error());
    refused("BF16", "[4294967296,0]", 2, "2 bytes for 0 elements");
    /* ordinary shapes and the limit's neighbourhood */
    CHECK(parse_one("BF16", "[3,5]", 30) == 0, "[3,5]: %s", frigg_error());
    CHECK(parse_one("BF16", "[]", 2) == 0, "scalar: %s", frigg_error());
    refused("BF16", "[1048576,1048576]", 64, "64 bytes for 1099511627776 elements"); /* 2^40: counted, too few bytes */
    TEST_MAIN_END();
}
