/* chat_render_stdin.c — a driver for scripts/oracle/chat_differential.py (not part of the build):
 * reads JSON lines {"messages","tools","add_generation_prompt"} and writes one JSON line each,
 * {"out": rendered} or {"err": frigg_error()}.
 * Build: cc -std=c11 -D_GNU_SOURCE -Icommon scripts/oracle/chat_render_stdin.c BUILD/libfriggcore.a -ljansson -lm */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>

#include "chat/chat.h"
#include "base/util.h"

int main(void) {
    char *line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, stdin) > 0) {
        json_t *r = json_loads(line, 0, NULL);
        char *out = r ? frigg_chat_render(json_object_get(r, "messages"), json_object_get(r, "tools"),
                                          json_is_true(json_object_get(r, "add_generation_prompt")))
                      : NULL;
        json_t *res = out ? json_pack("{s:s}", "out", out) : json_pack("{s:s}", "err", r ? frigg_error() : "bad JSON");
        if (!res) res = json_pack("{s:s}", "err", "output is not valid UTF-8");
        char *s = json_dumps(res, JSON_COMPACT);
        puts(s);
        free(s);
        free(out);
        json_decref(res);
        json_decref(r);
    }
    free(line);
    return 0;
}
