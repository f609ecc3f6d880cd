/* test_l2_plan.c — FRIGG_L2_PREFETCH plans (common/l2_plan.c): parsing, the errors for malformed plans, and
 * the byte ranges each decode GEMV is handed for one layer. */
#include <string.h>

#include "harness.h"
#include "l2_plan.h"
#include "util.h"

#define MiB 1048576ULL

static int parses(const char *s, frigg_l2_plan *p) { return frigg_l2_plan_parse(s, p) == 0; }

int main(void) {
    TEST_MAIN_BEGIN("test_l2_plan");
    frigg_l2_plan p;
    char buf[200];

    CHECK(parses("off", &p) && p.n == 0, "off");
    CHECK(parses("", &p) && p.n == 0, "empty");
    CHECK(parses("o:gu=all,down:next-qkv=8", &p) && p.n == 2, "two items");
    CHECK(p.item[0].kernel == FRIGG_L2_O && p.item[0].target == FRIGG_L2_GU && p.item[0].bytes == FRIGG_L2_ALL, "item 0");
    CHECK(p.item[1].kernel == FRIGG_L2_DOWN && p.item[1].target == FRIGG_L2_NEXT_QKV && p.item[1].bytes == 8 * MiB,
          "item 1");
    frigg_l2_plan_format(&p, buf, sizeof buf);
    CHECK(!strcmp(buf, "o:gu=all,down:next-qkv=8"), "format: %s", buf);
    CHECK(parses("qkv:o=0.5", &p) && p.item[0].bytes == MiB / 2, "fractional MiB");

    /* malformed plans are errors that say what is wrong, never a silent partial plan */
    const char *bad[] = {"on", "o:gu", "o=gu:3", "gu:o=1", "o:o=1", "attn:gu=1", "o:qkv=1", "o:gu=0", "o:gu=-1",
                         "o:gu=12x", "o:gu=", "o:gu=1,", "o:gu=1,o:gu=2", "o:gu=1,o:down=1,o:next-qkv=1",
                         "o:gu=1;down:next-qkv=1", "o:gu=nan"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = frigg_l2_plan_parse(bad[i], &p);
        CHECK(rc == -1 && strstr(frigg_error(), "FRIGG_L2_PREFETCH"), "'%s' must be refused (rc %d)", bad[i], rc);
    }

    /* ranges: Mimir's shapes (D 1536, I 4096) */
    unsigned long long size[FRIGG_L2_N] = {4 * 1536 * 1536 * 2ULL, 1536 * 1536 * 2ULL, 2 * 4096 * 1536 * 2ULL,
                                           1536 * 4096 * 2ULL, 4 * 1536 * 1536 * 2ULL};
    frigg_l2_range rg[4][2];
    int count[4];
    CHECK(parses("qkv:gu=8,o:gu=all,o:down=2.5,down:next-qkv=all", &p), "plan");
    frigg_l2_plan_layer(&p, size, rg, count);
    CHECK(count[FRIGG_L2_QKV] == 1 && rg[0][0].target == FRIGG_L2_GU && rg[0][0].off == 0 && rg[0][0].len == 8 * MiB,
          "qkv takes the first 8 MiB of gate_up");
    CHECK(count[FRIGG_L2_O] == 2 && rg[1][0].target == FRIGG_L2_GU && rg[1][0].off == 8 * MiB &&
              rg[1][0].len == size[FRIGG_L2_GU] - 8 * MiB,
          "o continues gate_up where qkv stopped, to its end");
    CHECK(rg[1][1].target == FRIGG_L2_DOWN && rg[1][1].off == 0 && rg[1][1].len == (5 * MiB / 2 & ~15ULL), "o: down");
    CHECK(count[FRIGG_L2_GU] == 0, "gu: nothing");
    CHECK(count[FRIGG_L2_DOWN] == 1 && rg[3][0].len == size[FRIGG_L2_NEXT_QKV], "down: all of the next gqkv");
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < count[k]; j++) CHECK(rg[k][j].len % 16 == 0 && rg[k][j].off % 16 == 0, "16-byte units");

    /* the last layer has no next gqkv: that item yields nothing; a target already taken whole yields nothing */
    size[FRIGG_L2_NEXT_QKV] = 0;
    CHECK(parses("o:gu=all,gu:down=all,down:next-qkv=all", &p), "plan 2");
    frigg_l2_plan_layer(&p, size, rg, count);
    CHECK(count[FRIGG_L2_DOWN] == 0, "no next layer: nothing");
    CHECK(count[FRIGG_L2_GU] == 1 && rg[2][0].len == size[FRIGG_L2_DOWN], "gu takes all of down");
    CHECK(parses("qkv:gu=all,o:gu=4", &p), "plan 3");
    frigg_l2_plan_layer(&p, size, rg, count);
    CHECK(count[FRIGG_L2_QKV] == 1 && count[FRIGG_L2_O] == 0, "gate_up already whole: o gets nothing");
    TEST_MAIN_END();
}
